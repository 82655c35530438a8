// Files: newest first, with thumbnails (GET /api/preview), search by name (GET /api/files?q=),
// a page per file (its info, faces on request), download links, and delete — one or several at
// once, always after a confirmation.
import { useEffect, useState } from 'react';
import { api, downloadUrl, type ApiFile } from '../api';
import { ConfirmDialog, ErrorBox, PageTitle, Thumb } from '../components';
import { DataTable, Pager, usePagedList, type Column } from '../data-table';
import { bytes, dateTime, relative } from '../format';
import { Link } from '../router';

export function FilesPage() {
  const [search, setSearch] = useState('');
  const [q, setQ] = useState('');
  const list = usePagedList<{ files: ApiFile[]; nextCursor: string | null }>('/api/files', { limit: '20', q });
  const files = list.data?.files ?? [];
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [confirming, setConfirming] = useState<ApiFile[]>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [notice, setNotice] = useState<string>();

  // Searching as the person types, a moment after they stop.
  useEffect(() => {
    const timer = setTimeout(() => {
      if (search.trim() === q) return;
      list.reset();
      setQ(search.trim());
    }, 300);
    return () => clearTimeout(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [search, q]);
  // A selection is of the rows on screen.
  useEffect(() => setSelected(new Set()), [list.data]);

  const remove = async (targets: ApiFile[]) => {
    setConfirming(undefined);
    setError(undefined);
    setBusy(true);
    let deleted = 0;
    try {
      for (const file of targets) {
        await api.del(`/api/files/${encodeURIComponent(file.fileId)}`);
        deleted++;
      }
      setNotice(deleted === 1 ? `Deleted ${targets[0]!.filename}.` : `Deleted ${deleted} files.`);
    } catch (err) {
      setError(err);
      if (deleted > 0) setNotice(`Deleted ${deleted} of ${targets.length} files.`);
    } finally {
      setBusy(false);
      list.reload();
    }
  };
  const toggle = (fileId: string, on: boolean) =>
    setSelected((current) => {
      const next = new Set(current);
      if (on) next.add(fileId);
      else next.delete(fileId);
      return next;
    });
  const allSelected = files.length > 0 && files.every((f) => selected.has(f.fileId));

  const columns: Column<ApiFile>[] = [
    {
      header: (
        <input
          type="checkbox"
          aria-label="Select every file on this page"
          checked={allSelected}
          onChange={(e) => setSelected(e.target.checked ? new Set(files.map((f) => f.fileId)) : new Set())}
        />
      ),
      label: 'Select',
      className: 'select',
      cell: (file) => (
        <input
          type="checkbox"
          aria-label={`Select ${file.filename}`}
          checked={selected.has(file.fileId)}
          onChange={(e) => toggle(file.fileId, e.target.checked)}
        />
      ),
    },
    { label: 'Preview', cell: (file) => <Thumb fileId={file.fileId} format={file.format} alt={file.filename} box={128} /> },
    {
      header: 'Name',
      className: 'wrap',
      cell: (file) => (
        <div>
          <div data-testid="file-name">
            <Link to={`/files/${encodeURIComponent(file.fileId)}`} title={`Info on ${file.filename}`}>
              {file.filename}
            </Link>
          </div>
          <div className="muted small">
            <code>{file.fileId}</code>
          </div>
        </div>
      ),
    },
    {
      header: 'Format',
      cell: (file) => (
        <div>
          {file.format}
          {file.width && file.height ? (
            <div className="muted small">
              {`${file.width}×${file.height}`}
              {file.pages ? ` · ${file.pages} frames` : ''}
            </div>
          ) : null}
        </div>
      ),
    },
    { header: 'Size', cell: (file) => bytes(file.size) },
    { header: 'Origin', cell: (file) => (file.origin === 'output' && file.taskId ? <Link to={`/tasks/${file.taskId}`}>output</Link> : 'upload') },
    { header: 'Created', title: (file) => file.createdAt, cell: (file) => dateTime(file.createdAt) },
    { header: 'Expires', title: (file) => file.expiresAt, cell: (file) => relative(file.expiresAt) },
    {
      label: 'Actions',
      cell: (file) => (
        <div className="actions">
          <a className="button secondary" href={downloadUrl(file.fileId)} download={file.filename}>
            Download
          </a>
          <Link
            to={`/playground?fileId=${encodeURIComponent(file.fileId)}`}
            className="button secondary"
            title={`Open ${file.filename} in the playground`}
          >
            Open in playground
          </Link>
          <button type="button" className="secondary" onClick={() => setConfirming([file])} aria-label={`Delete ${file.filename}`}>
            Delete
          </button>
        </div>
      ),
    },
  ];
  const chosen = files.filter((f) => selected.has(f.fileId));
  return (
    <>
      <PageTitle title="Files">
        <Link to="/playground" className="button">
          Upload in the playground
        </Link>
      </PageTitle>
      <ErrorBox error={error ?? list.error} onRetry={list.error ? list.reload : undefined} />
      {notice && (
        <div className="notice ok" role="status">
          {notice}
        </div>
      )}
      <section className="card" aria-label="Your files">
        <div className="toolbar">
          <label className="sr-only" htmlFor="file-search">
            Search files by name
          </label>
          <input id="file-search" type="search" placeholder="Search by name" value={search} onChange={(e) => setSearch(e.target.value)} />
          <button
            type="button"
            className="danger"
            disabled={chosen.length === 0 || busy}
            onClick={() => setConfirming(chosen)}
            data-testid="delete-selected"
          >
            Delete selected{chosen.length > 0 ? ` (${chosen.length})` : ''}
          </button>
        </div>
        <DataTable
          testId="files-table"
          caption="Files"
          rows={files}
          columns={columns}
          rowKey={(file) => file.fileId}
          rowAttributes={(file) => ({ 'data-file-id': file.fileId })}
          empty={q ? `No file names contain “${q}”.` : 'No files. Uploads and task outputs appear here until they expire.'}
          loading={list.loading}
          error={list.error}
        />
        <Pager list={list} />
      </section>
      <ConfirmDialog
        open={!!confirming}
        title={confirming?.length === 1 ? 'Delete this file?' : `Delete ${confirming?.length ?? 0} files?`}
        confirmLabel={confirming?.length === 1 ? 'Delete file' : `Delete ${confirming?.length ?? 0} files`}
        danger
        onCancel={() => setConfirming(undefined)}
        onConfirm={() => confirming && remove(confirming)}
      >
        {confirming?.length === 1 ? (
          <p>
            <strong>{confirming[0]!.filename}</strong> is deleted for good and its storage freed. Tasks that made it keep their record.
          </p>
        ) : (
          <>
            <p>These files are deleted for good and their storage freed:</p>
            <ul>
              {confirming?.slice(0, 8).map((f) => (
                <li key={f.fileId}>{f.filename}</li>
              ))}
              {(confirming?.length ?? 0) > 8 && <li>and {(confirming?.length ?? 0) - 8} more</li>}
            </ul>
          </>
        )}
      </ConfirmDialog>
    </>
  );
}
