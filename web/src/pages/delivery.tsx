// Delivery: the account's signing keys (the secret shown once), presets and origins, and a URL
// builder that signs a /r/ URL in the browser and shows the image beside it. The server never
// hands a secret out again, so the builder signs with the secret the person pastes (or the one
// just created), held only in this page's memory and never sent anywhere; a public preset needs
// none (`_`). Signing is the SDK's browser-safe deliveryUrl (Web Crypto).
import { useState, type FormEvent, type ReactNode } from 'react';
import type { components } from '../../../sdk/openapi';
import { DeliveryUrlError, RENDER_FORMATS, deliveryUrl, transformSegment, type DeliverySource, type Transform } from '../../../sdk/delivery';
import { api, type AccountInfo, type ApiFile } from '../api';
import { ConfirmDialog, CopyButton, ErrorBox, PageTitle, useAsync } from '../components';
import { DataTable, type Column } from '../data-table';
import { dateTime } from '../format';

type SigningKey = components['schemas']['SigningKey'];
type CreatedSigningKey = components['schemas']['CreatedSigningKey'];
type Preset = components['schemas']['Preset'];
type Origin = components['schemas']['Origin'];

const idempotent = () => ({ headers: { 'idempotency-key': crypto.randomUUID() } });
/** The builder's fields: each a pair of the transform grammar, with its choices where it has them. */
const FIELDS: { name: keyof Transform; label: string; choices?: string[]; placeholder?: string }[] = [
  { name: 'w', label: 'Width (w)', placeholder: 'px' },
  { name: 'h', label: 'Height (h)', placeholder: 'px' },
  { name: 'fit', label: 'Fit', choices: ['cover', 'contain', 'fill', 'inside', 'outside'] },
  {
    name: 'g',
    label: 'Gravity (g)',
    choices: ['center', 'north', 'northeast', 'east', 'southeast', 'south', 'southwest', 'west', 'northwest', 'attention', 'entropy', 'face'],
  },
  { name: 'dpr', label: 'Pixel ratio (dpr)', choices: ['1', '1.5', '2', '3', '4'] },
  { name: 'f', label: 'Format (f)', choices: ['auto', ...RENDER_FORMATS] },
  { name: 'q', label: 'Quality (q)', placeholder: '1–100' },
  { name: 'bg', label: 'Background (bg)', placeholder: 'ffffff' },
  { name: 'rot', label: 'Rotate (rot)', choices: ['90', '180', '270'] },
  { name: 'flip', label: 'Flip', choices: ['h', 'v', 'hv'] },
  { name: 'blur', label: 'Blur (sigma)', placeholder: '0.3–1000' },
  { name: 'sharpen', label: 'Sharpen (sigma)', placeholder: '0.01–10' },
];

/** A card with a heading its region is named by. */
function Card({ id, title, children, testId }: { id: string; title: ReactNode; children: ReactNode; testId?: string }) {
  return (
    <section className="card" aria-labelledby={id} data-testid={testId}>
      <h2 id={id}>{title}</h2>
      {children}
    </section>
  );
}

/** Runs `action`, keeping its error; answers whether it succeeded. */
function useAction() {
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<unknown>): Promise<boolean> => {
    setError(undefined);
    setBusy(true);
    try {
      await action();
      return true;
    } catch (err) {
      setError(err);
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, run, setError };
}

function SigningKeys({
  list,
  onCreated,
}: {
  list: ReturnType<typeof useAsync<{ signingKeys: SigningKey[] }>>;
  onCreated: (key: CreatedSigningKey) => void;
}) {
  const [created, setCreated] = useState<CreatedSigningKey>();
  const [deleting, setDeleting] = useState<SigningKey>();
  const action = useAction();
  const create = () =>
    action.run(async () => {
      const key = await api.post<CreatedSigningKey>('/api/signing-keys', undefined, idempotent());
      setCreated(key);
      onCreated(key);
    });
  const remove = (key: SigningKey) =>
    action.run(async () => {
      setDeleting(undefined);
      await api.del(`/api/signing-keys/${encodeURIComponent(key.keyId)}`);
      if (created?.keyId === key.keyId) setCreated(undefined);
      list.reload();
    });
  const columns: Column<SigningKey>[] = [
    { header: 'Key id', cell: (k) => <code>{k.keyId}</code> },
    { header: 'Created', title: (k) => k.createdAt, cell: (k) => dateTime(k.createdAt) },
    {
      label: 'Actions',
      cell: (k) => (
        <div className="actions">
          <button type="button" className="secondary" onClick={() => setDeleting(k)} aria-label={`Delete signing key ${k.keyId}`}>
            Delete
          </button>
        </div>
      ),
    },
  ];
  return (
    <Card id="signing-keys-title" title="Signing keys">
      <p className="muted">
        A URL names a key by its id and carries an HMAC made with the key's secret. Sign on your server or at build time; never put the secret in a
        page.
      </p>
      <div>
        <button type="button" onClick={create} disabled={action.busy}>
          Create signing key
        </button>
      </div>
      {created && (
        <div className="secret" data-testid="new-signing-key">
          <p>
            <strong>
              Secret of <code>{created.keyId}</code>
            </strong>{' '}
            — shown only now; the URL builder below keeps it in this page's memory until you leave.
          </p>
          <div className="secret-row">
            <code className="secret-value" data-testid="new-signing-key-secret">
              {created.secret}
            </code>
            <CopyButton text={created.secret} />
          </div>
        </div>
      )}
      <ErrorBox error={action.error ?? list.error} onRetry={list.error ? list.reload : undefined} />
      <DataTable
        compact
        testId="signing-keys-table"
        caption="Signing keys"
        rows={list.data?.signingKeys ?? []}
        columns={columns}
        rowKey={(k) => k.keyId}
        rowAttributes={(k) => ({ 'data-key-id': k.keyId })}
        empty="No signing keys yet."
        loading={list.loading}
        error={list.error}
      />
      <ConfirmDialog
        open={!!deleting}
        title="Delete this signing key?"
        confirmLabel="Delete key"
        danger
        onCancel={() => setDeleting(undefined)}
        onConfirm={() => deleting && remove(deleting)}
      >
        {deleting && (
          <p>
            Every URL signed with <code>{deleting.keyId}</code> stops working at once (403), public presets' URLs naming it included.
          </p>
        )}
      </ConfirmDialog>
    </Card>
  );
}

function Presets({ list }: { list: ReturnType<typeof useAsync<{ presets: Preset[] }>> }) {
  const [name, setName] = useState('');
  const [transform, setTransform] = useState('');
  const [isPublic, setPublic] = useState(false);
  const [editing, setEditing] = useState<string>();
  const [deleting, setDeleting] = useState<Preset>();
  const action = useAction();
  const reset = () => {
    setEditing(undefined);
    setName('');
    setTransform('');
    setPublic(false);
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void action.run(async () => {
      if (editing) await api.put(`/api/presets/${encodeURIComponent(editing)}`, { transform: transform.trim(), public: isPublic });
      else await api.post('/api/presets', { name: name.trim(), transform: transform.trim(), public: isPublic }, idempotent());
      reset();
      list.reload();
    });
  };
  const edit = (preset: Preset) => {
    setEditing(preset.name);
    setName(preset.name);
    setTransform(preset.transform);
    setPublic(preset.public);
  };
  const remove = (preset: Preset) =>
    action.run(async () => {
      setDeleting(undefined);
      await api.del(`/api/presets/${encodeURIComponent(preset.name)}`);
      if (editing === preset.name) reset();
      list.reload();
    });
  const columns: Column<Preset>[] = [
    { header: 'Name', cell: (p) => <code>{p.name}</code> },
    { header: 'Transform', className: 'wrap', cell: (p) => <code>{p.transform}</code> },
    { header: 'Public', cell: (p) => (p.public ? <span className="badge ok">public</span> : <span className="muted">signed only</span>) },
    {
      label: 'Actions',
      cell: (p) => (
        <div className="actions">
          <button type="button" className="secondary" onClick={() => edit(p)} aria-label={`Edit preset ${p.name}`}>
            Edit
          </button>
          <button type="button" className="secondary" onClick={() => setDeleting(p)} aria-label={`Delete preset ${p.name}`}>
            Delete
          </button>
        </div>
      ),
    },
  ];
  return (
    <Card id="presets-title" title="Presets">
      <p className="muted">
        A named transform, used as <code>p:name</code>. A public preset is usable without a signature: <code>/r/keyId/_/p:name/source</code>.
      </p>
      <form className="form" onSubmit={submit} aria-label={editing ? `Edit preset ${editing}` : 'New preset'}>
        <label>
          Name
          <input
            name="presetName"
            required
            pattern="[a-z0-9\-]{1,32}"
            title="a-z, 0-9 and -, at most 32 characters"
            placeholder="card"
            value={name}
            disabled={!!editing}
            onChange={(e) => setName(e.target.value)}
          />
        </label>
        <label>
          Transform
          <input
            name="presetTransform"
            required
            placeholder="w:400,h:300,fit:cover,f:auto"
            value={transform}
            onChange={(e) => setTransform(e.target.value)}
          />
        </label>
        <label className="inline-label">
          <input type="checkbox" checked={isPublic} onChange={(e) => setPublic(e.target.checked)} /> Public (usable unsigned)
        </label>
        <ErrorBox error={action.error ?? list.error} onRetry={list.error ? list.reload : undefined} />
        <div className="form-buttons">
          <button type="submit" disabled={action.busy}>
            {editing ? 'Save preset' : 'Add preset'}
          </button>
          {editing && (
            <button type="button" className="secondary" onClick={reset}>
              Cancel
            </button>
          )}
        </div>
      </form>
      <DataTable
        compact
        testId="presets-table"
        caption="Presets"
        rows={list.data?.presets ?? []}
        columns={columns}
        rowKey={(p) => p.name}
        rowAttributes={(p) => ({ 'data-preset': p.name })}
        empty="No presets yet."
        loading={list.loading}
        error={list.error}
      />
      <ConfirmDialog
        open={!!deleting}
        title="Delete this preset?"
        confirmLabel="Delete preset"
        danger
        onCancel={() => setDeleting(undefined)}
        onConfirm={() => deleting && remove(deleting)}
      >
        {deleting && (
          <p>
            URLs with <code>p:{deleting.name}</code> stop rendering.
          </p>
        )}
      </ConfirmDialog>
    </Card>
  );
}

function Origins({ list }: { list: ReturnType<typeof useAsync<{ origins: Origin[]; limit: number }>> }) {
  const [name, setName] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [deleting, setDeleting] = useState<Origin>();
  const action = useAction();
  const origins = list.data?.origins ?? [];
  const submit = (event: FormEvent) => {
    event.preventDefault();
    void action.run(async () => {
      await api.post('/api/origins', { name: name.trim(), baseUrl: baseUrl.trim() }, idempotent());
      setName('');
      setBaseUrl('');
      list.reload();
    });
  };
  const remove = (origin: Origin) =>
    action.run(async () => {
      setDeleting(undefined);
      await api.del(`/api/origins/${encodeURIComponent(origin.name)}`);
      list.reload();
    });
  const columns: Column<Origin>[] = [
    { header: 'Name', cell: (o) => <code>{o.name}</code> },
    { header: 'Base URL', className: 'wrap', cell: (o) => <code>{o.baseUrl}</code> },
    {
      label: 'Actions',
      cell: (o) => (
        <div className="actions">
          <button type="button" className="secondary" onClick={() => setDeleting(o)} aria-label={`Delete origin ${o.name}`}>
            Delete
          </button>
        </div>
      ),
    },
  ];
  return (
    <Card
      id="origins-title"
      title={
        <>
          Origins{' '}
          {list.data && (
            <span className="muted small">
              ({origins.length} of {list.data.limit})
            </span>
          )}
        </>
      }
    >
      <p className="muted">
        Images fetched from your own server: <code>o/name/path</code> renders <code>baseUrl/path</code>.
      </p>
      <form className="form" onSubmit={submit} aria-label="New origin">
        <label>
          Name
          <input
            name="originName"
            required
            pattern="[a-z0-9\-]{1,32}"
            title="a-z, 0-9 and -, at most 32 characters"
            placeholder="shop"
            value={name}
            onChange={(e) => setName(e.target.value)}
          />
        </label>
        <label>
          Base URL
          <input
            name="originBaseUrl"
            type="url"
            required
            placeholder="https://static.example.com/images"
            value={baseUrl}
            onChange={(e) => setBaseUrl(e.target.value)}
          />
        </label>
        <ErrorBox error={action.error ?? list.error} onRetry={list.error ? list.reload : undefined} />
        <div>
          <button type="submit" disabled={action.busy}>
            Add origin
          </button>
        </div>
      </form>
      <DataTable
        compact
        testId="origins-table"
        caption="Origins"
        rows={origins}
        columns={columns}
        rowKey={(o) => o.name}
        rowAttributes={(o) => ({ 'data-origin': o.name })}
        empty="No origins yet."
        loading={list.loading}
        error={list.error}
      />
      <ConfirmDialog
        open={!!deleting}
        title="Delete this origin?"
        confirmLabel="Delete origin"
        danger
        onCancel={() => setDeleting(undefined)}
        onConfirm={() => deleting && remove(deleting)}
      >
        {deleting && (
          <p>
            URLs with <code>o/{deleting.name}/…</code> stop rendering, and what was fetched from it is deleted.
          </p>
        )}
      </ConfirmDialog>
    </Card>
  );
}

function Builder(props: { keys: SigningKey[]; presets: Preset[]; origins: Origin[]; secrets: Map<string, string> }) {
  const files = useAsync((signal) => api.get<{ files: ApiFile[] }>('/api/files?limit=50', { signal }), []);
  const [sourceKind, setSourceKind] = useState<'file' | 'origin'>('file');
  const [fileId, setFileId] = useState('');
  const [origin, setOrigin] = useState('');
  const [path, setPath] = useState('');
  const [preset, setPreset] = useState('');
  const [values, setValues] = useState<Partial<Record<keyof Transform, string>>>({});
  const [keyId, setKeyId] = useState('');
  const [pasted, setPasted] = useState<Record<string, string>>({});
  const [built, setBuilt] = useState<{ url: string; asked?: number }>();
  const [image, setImage] = useState<{ width: number; height: number } | 'failed'>();
  const [error, setError] = useState<unknown>();

  const chosenKey = keyId || props.keys[0]?.keyId || '';
  const secret = pasted[chosenKey] ?? props.secrets.get(chosenKey) ?? '';
  const chosenFile = fileId || files.data?.files[0]?.fileId || '';
  const chosenOrigin = origin || props.origins[0]?.name || '';
  const pairs = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== '')) as Transform;
  const onlyPreset = preset !== '' && Object.keys(pairs).length === 0;
  const publicPreset = onlyPreset && props.presets.some((p) => p.name === preset && p.public);

  const build = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    setBuilt(undefined);
    setImage(undefined);
    try {
      if (!chosenKey) throw new DeliveryUrlError('Create a signing key first: a URL names one.');
      const source: DeliverySource = sourceKind === 'file' ? chosenFile : { origin: chosenOrigin, path };
      const transform: Transform = { ...(preset ? { p: preset } : {}), ...pairs };
      // Checked (and so explained) before anything is signed.
      transformSegment(transform);
      const unsigned = publicPreset && !secret;
      const url = await deliveryUrl(source, transform, {
        baseUrl: window.location.origin,
        signingKey: { keyId: chosenKey, ...(unsigned ? {} : { secret }) },
        publicPreset: unsigned,
      });
      const width = pairs.w === undefined ? undefined : Math.round(Number(pairs.w) * Number(pairs.dpr ?? 1));
      setBuilt({ url, asked: width });
    } catch (err) {
      setError(err);
    }
  };
  const set = (name: keyof Transform, value: string) => setValues((current) => ({ ...current, [name]: value }));

  return (
    <Card id="builder-title" title="URL builder" testId="url-builder">
      <form className="form" onSubmit={build} aria-label="Build a delivery URL">
        <fieldset className="group">
          <legend>Source</legend>
          <label className="inline-label">
            <input type="radio" name="sourceKind" checked={sourceKind === 'file'} onChange={() => setSourceKind('file')} /> A stored file
          </label>{' '}
          <label className="inline-label">
            <input type="radio" name="sourceKind" checked={sourceKind === 'origin'} onChange={() => setSourceKind('origin')} /> An origin's image
          </label>
          {sourceKind === 'file' ? (
            <label>
              File
              <select name="fileId" value={chosenFile} onChange={(e) => setFileId(e.target.value)}>
                {(files.data?.files ?? []).map((f) => (
                  <option key={f.fileId} value={f.fileId}>
                    {f.filename} ({f.fileId})
                  </option>
                ))}
              </select>
            </label>
          ) : (
            <div className="grid two">
              <label>
                Origin
                <select name="origin" value={chosenOrigin} onChange={(e) => setOrigin(e.target.value)}>
                  {props.origins.map((o) => (
                    <option key={o.name} value={o.name}>
                      {o.name}
                    </option>
                  ))}
                </select>
              </label>
              <label>
                Path
                <input name="originPath" placeholder="photos/summer.jpg" value={path} onChange={(e) => setPath(e.target.value)} />
              </label>
            </div>
          )}
          <ErrorBox error={files.error} onRetry={files.reload} />
        </fieldset>
        <fieldset className="group">
          <legend>Transform</legend>
          <label>
            Preset
            <select name="preset" value={preset} onChange={(e) => setPreset(e.target.value)}>
              <option value="">none</option>
              {props.presets.map((p) => (
                <option key={p.name} value={p.name}>
                  {p.name}
                  {p.public ? ' (public)' : ''}
                </option>
              ))}
            </select>
          </label>
          <div className="builder-fields">
            {FIELDS.map((field) => (
              <label key={field.name}>
                {field.label}
                {field.choices ? (
                  <select name={field.name} value={values[field.name] ?? ''} onChange={(e) => set(field.name, e.target.value)}>
                    <option value="">—</option>
                    {field.choices.map((choice) => (
                      <option key={choice} value={choice}>
                        {choice}
                      </option>
                    ))}
                  </select>
                ) : (
                  <input
                    name={field.name}
                    inputMode="decimal"
                    placeholder={field.placeholder}
                    value={values[field.name] ?? ''}
                    onChange={(e) => set(field.name, e.target.value.trim())}
                  />
                )}
              </label>
            ))}
          </div>
        </fieldset>
        <fieldset className="group">
          <legend>Signing key</legend>
          <label>
            Key
            <select name="keyId" value={chosenKey} onChange={(e) => setKeyId(e.target.value)}>
              {props.keys.map((k) => (
                <option key={k.keyId} value={k.keyId}>
                  {k.keyId}
                </option>
              ))}
            </select>
          </label>
          <label>
            <span>
              Secret{' '}
              <span className="muted small">
                (kept in this page only; {publicPreset ? 'not needed for a public preset' : 'shown once when the key was made'})
              </span>
            </span>
            <input
              name="secret"
              type="password"
              autoComplete="off"
              value={secret}
              onChange={(e) => setPasted((current) => ({ ...current, [chosenKey]: e.target.value.trim() }))}
            />
          </label>
        </fieldset>
        <ErrorBox error={error} />
        <div>
          <button type="submit">Build URL</button>
        </div>
      </form>
      {built && (
        <div className="builder-result" data-testid="built-url">
          <div className="builder-url">
            <div className="secret-row">
              <code className="secret-value" data-testid="built-url-value">
                {built.url}
              </code>
              <CopyButton text={built.url} label="Copy URL" />
            </div>
            <p className="muted small" role="status">
              {image === undefined
                ? 'Rendering…'
                : image === 'failed'
                  ? 'The image did not load: open the URL to see the error.'
                  : `Rendered ${image.width} × ${image.height} px${built.asked ? ` (asked for ${built.asked} px wide)` : ''}.`}{' '}
              <a href={built.url} target="_blank" rel="noreferrer">
                Open
              </a>
            </p>
          </div>
          <img
            key={built.url}
            className="builder-image"
            src={built.url}
            alt="The image this URL renders"
            data-testid="built-image"
            onLoad={(e) => setImage({ width: e.currentTarget.naturalWidth, height: e.currentTarget.naturalHeight })}
            onError={() => setImage('failed')}
          />
        </div>
      )}
    </Card>
  );
}

export function DeliveryPage() {
  const keys = useAsync((signal) => api.get<{ signingKeys: SigningKey[] }>('/api/signing-keys', { signal }), []);
  const presets = useAsync((signal) => api.get<{ presets: Preset[] }>('/api/presets', { signal }), []);
  const origins = useAsync((signal) => api.get<{ origins: Origin[]; limit: number }>('/api/origins', { signal }), []);
  const account = useAsync((signal) => api.get<AccountInfo>('/api/account', { signal }), []);
  // Secrets of keys created on this visit: in memory only, gone when the page is left.
  const [secrets, setSecrets] = useState(new Map<string, string>());
  const renders = account.data?.limits.monthlyRenders;
  return (
    <>
      <PageTitle title="Delivery" />
      <p className="muted">
        Delivery URLs render an image on the first request and serve the stored render afterwards, for an <code>&lt;img src&gt;</code>: signed, so no
        API key travels. See docs/guides/delivery-urls.md in the repository and <a href="/docs">the API reference</a>.
      </p>
      {renders === 0 && (
        <div className="notice" data-testid="no-renders">
          Your plan includes no delivery renders: its URLs answer 429 RENDER_QUOTA_EXCEEDED until the account moves to Pro or Max.
        </div>
      )}
      <SigningKeys
        list={keys}
        onCreated={(key) => {
          setSecrets((current) => new Map(current).set(key.keyId, key.secret));
          keys.reload();
        }}
      />
      <Builder keys={keys.data?.signingKeys ?? []} presets={presets.data?.presets ?? []} origins={origins.data?.origins ?? []} secrets={secrets} />
      <Presets list={presets} />
      <Origins list={origins} />
    </>
  );
}
