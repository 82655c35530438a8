// Small pieces the pages share.
import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { ApiError, fetchBlob, previewUrl, type TaskStatus } from './api';

/** Runs `load` when `deps` change; `reload` runs it again. Errors are kept, not thrown. */
export function useAsync<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<Error>();
  const [loading, setLoading] = useState(true);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    const controller = new AbortController();
    setLoading(true);
    load(controller.signal).then(
      (value) => {
        if (controller.signal.aborted) return;
        setData(value);
        setError(undefined);
        setLoading(false);
      },
      (err: Error) => {
        if (controller.signal.aborted) return;
        setError(err);
        setLoading(false);
      },
    );
    return () => controller.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, version]);
  const reload = useCallback(() => setVersion((v) => v + 1), []);
  return { data, error, loading, reload, setData };
}

/** The request never reached the server (offline, server down): not the server's answer. */
function isOffline(error: unknown): boolean {
  if (error instanceof ApiError) return error.status === 0 && error.code === 'NETWORK_ERROR';
  // fetch() rejects with a TypeError when no answer came (Chromium "Failed to fetch", Firefox
  // "NetworkError…", Safari "Load failed"); other TypeErrors are bugs, shown as they are.
  return error instanceof TypeError && /fetch|network|load failed/i.test(error.message);
}

/**
 * An error as the person should read it: the server's code and message (and the fields it
 * names), or, when the server could not be reached at all, that the dashboard is offline, with
 * a way to try again. Either way it is never shown as an empty list.
 */
export function ErrorBox({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (!error) return null;
  if (isOffline(error)) {
    return (
      <div className="state offline" role="alert" data-testid="offline">
        <strong>Cannot reach the server.</strong> You may be offline, or the server is restarting; nothing here is lost.
        {onRetry && (
          <div className="state-actions">
            <button type="button" className="secondary" onClick={onRetry}>
              Try again
            </button>
          </div>
        )}
      </div>
    );
  }
  const e = error as Error;
  return (
    <div className="error" role="alert">
      {e instanceof ApiError ? (
        <>
          <strong>{e.code}</strong> {e.message}
          {e.fields.length > 0 && (
            <ul>
              {e.fields.map((f) => (
                <li key={f.field + f.message}>
                  <code>{f.field}</code>: {f.message}
                </li>
              ))}
            </ul>
          )}
          {e.requestId && <div className="small">request {e.requestId}</div>}
        </>
      ) : (
        e.message
      )}
      {onRetry && (
        <div className="state-actions">
          <button type="button" className="secondary small" onClick={onRetry}>
            Try again
          </button>
        </div>
      )}
    </div>
  );
}

/**
 * A confirmation before something that cannot be undone: a modal dialog naming what happens,
 * with the destructive button labelled by what it does. Escape or Cancel closes it.
 */
export function ConfirmDialog(props: {
  open: boolean;
  title: string;
  children: ReactNode;
  confirmLabel: string;
  danger?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (props.open && !dialog.open) dialog.showModal();
    if (!props.open && dialog.open) dialog.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      className="confirm"
      aria-labelledby="confirm-title"
      data-testid="confirm-dialog"
      onCancel={(event) => {
        event.preventDefault();
        props.onCancel();
      }}
    >
      {props.open && (
        <>
          <h2 id="confirm-title">{props.title}</h2>
          <div>{props.children}</div>
          <div className="dialog-actions">
            <button type="button" className="secondary" onClick={props.onCancel} autoFocus>
              Cancel
            </button>
            <button type="button" className={props.danger ? 'danger' : undefined} onClick={props.onConfirm}>
              {props.confirmLabel}
            </button>
          </div>
        </>
      )}
    </dialog>
  );
}

/** A usage bar: `used` of `limit`, coloured as it fills. */
export function UsageBar(props: {
  label: string;
  usage: { used: number; limit: number };
  format: (n: number) => string;
  note?: ReactNode;
  testId?: string;
}) {
  const { used, limit } = props.usage;
  const fraction = limit > 0 ? Math.min(1, used / limit) : used > 0 ? 1 : 0;
  const level = fraction >= 0.9 ? 'high' : fraction >= 0.7 ? 'mid' : 'low';
  return (
    <div className="usage" data-testid={props.testId}>
      <div className="usage-head">
        <span>{props.label}</span>
        <span className="usage-numbers">
          {props.format(used)} / {limit > 0 ? props.format(limit) : 'none on this plan'}
        </span>
      </div>
      <div className="bar" role="progressbar" aria-label={props.label} aria-valuemin={0} aria-valuemax={limit} aria-valuenow={used}>
        <div className={`bar-fill ${level}`} style={{ width: `${(fraction * 100).toFixed(1)}%` }} />
      </div>
      {props.note && <div className="muted small">{props.note}</div>}
    </div>
  );
}

export function ProgressBar({ value, label }: { value: number; label: string }) {
  return (
    <div className="bar thin" role="progressbar" aria-label={label} aria-valuemin={0} aria-valuemax={100} aria-valuenow={Math.round(value)}>
      <div className="bar-fill low" style={{ width: `${Math.max(0, Math.min(100, value)).toFixed(0)}%` }} />
    </div>
  );
}

export function StatusBadge({ status }: { status: TaskStatus | string }) {
  return <span className={`badge status-${status}`}>{status}</span>;
}

/**
 * A preview of a stored file through GET /api/preview (the session's cookie goes with the fetch;
 * the image is shown from a blob: URL). Files without a preview show their format instead.
 */
export function Thumb({ fileId, format, box = 160, alt, eager }: { fileId: string; format?: string; box?: number; alt: string; eager?: boolean }) {
  const ref = useRef<HTMLDivElement>(null);
  // Only what scrolls into view is fetched.
  const [seen, setSeen] = useState(() => !('IntersectionObserver' in window));
  const visible = seen || eager === true;
  useEffect(() => {
    const node = ref.current;
    if (visible || !node) return;
    const observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) setSeen(true);
    });
    observer.observe(node);
    return () => observer.disconnect();
  }, [visible]);
  const { src, failed } = usePreview(visible ? fileId : undefined, box);
  return (
    <div className={box > 160 ? 'thumb thumb-large' : 'thumb'} ref={ref}>
      {src ? <img src={src} alt={alt} /> : <span className="thumb-placeholder">{failed ? (format ?? 'file').toUpperCase() : '…'}</span>}
    </div>
  );
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // No clipboard permission (an insecure origin, a headless browser): select for Ctrl+C.
      const field = document.createElement('textarea');
      field.value = text;
      document.body.appendChild(field);
      field.select();
      document.execCommand('copy');
      field.remove();
    }
    setCopied(true);
    setTimeout(() => setCopied(false), 2000);
  };
  return (
    <button type="button" className="secondary" onClick={copy}>
      {copied ? 'Copied' : label}
    </button>
  );
}

export function PageTitle({ title, children }: { title: string; children?: ReactNode }) {
  useEffect(() => {
    document.title = `${title} · imgapi`;
  }, [title]);
  return (
    <div className="page-title">
      <h1>{title}</h1>
      {children && <div className="page-actions">{children}</div>}
    </div>
  );
}

/** A pixel box (a face, a covered region) drawn over an image shown at any size: placed in percent of the image's own size. */
export function RegionBox({
  box,
  width,
  height,
}: {
  box: { left: number; top: number; width: number; height: number; score?: number; source?: string };
  width: number;
  height: number;
}) {
  const percent = (value: number, of: number) => `${(value / of) * 100}%`;
  return (
    <div
      className="face-box"
      data-testid="face-box"
      title={box.source === 'region' ? 'region' : `face${box.score !== undefined ? `, score ${box.score}` : ''}`}
      style={{ left: percent(box.left, width), top: percent(box.top, height), width: percent(box.width, width), height: percent(box.height, height) }}
    />
  );
}

/**
 * A preview of a stored file as a blob: URL (through the dashboard's request limiter), and whether
 * it could not be had; nothing is fetched while `fileId` is undefined.
 */
export function usePreview(fileId: string | undefined, box: number): { src?: string; failed: boolean } {
  const [src, setSrc] = useState<string>();
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    if (!fileId) return;
    const controller = new AbortController();
    let url: string | undefined;
    fetchBlob(previewUrl(fileId, box), controller.signal).then(
      (blob) => {
        url = URL.createObjectURL(blob);
        setSrc(url);
      },
      () => {
        if (!controller.signal.aborted) setFailed(true);
      },
    );
    return () => {
      controller.abort();
      if (url) URL.revokeObjectURL(url);
    };
  }, [fileId, box]);
  return { src, failed };
}
