// Webhooks: the account's endpoints (GET/POST/DELETE /api/webhooks), the signing secret shown
// once on creation, each endpoint's recent deliveries with their attempts, a test event, and
// resending one delivery. The same /api routes an API client uses, with the session.
import { useState, type FormEvent } from 'react';
import type { components } from '../../../sdk/openapi';
import { api } from '../api';
import { ConfirmDialog, CopyButton, ErrorBox, PageTitle, useAsync } from '../components';
import { DataTable, Pager, usePagedList, type Column } from '../data-table';
import { dateTime, relative } from '../format';

type Webhook = components['schemas']['Webhook'];
type CreatedWebhook = components['schemas']['CreatedWebhook'];
type Delivery = components['schemas']['WebhookDelivery'];
type WebhookEvent = Webhook['events'][number];

const EVENTS: { event: WebhookEvent; help: string }[] = [
  { event: 'task.completed', help: 'a task finished with its output' },
  { event: 'task.failed', help: 'a task failed, with its error' },
  { event: 'task.canceled', help: 'a task was canceled' },
  { event: 'batch.completed', help: 'every task of a batch has finished' },
];

const STATUS_CLASS: Record<Delivery['status'], string> = { pending: 'status-processing', delivered: 'status-completed', failed: 'status-failed' };

function CreateCard({ onCreated }: { onCreated: () => void }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<Set<WebhookEvent>>(new Set(EVENTS.map((e) => e.event)));
  const [created, setCreated] = useState<CreatedWebhook>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    setCreated(undefined);
    if (events.size === 0) {
      setError(new Error('Choose at least one event to send.'));
      return;
    }
    setBusy(true);
    try {
      const body = {
        url: url.trim(),
        events: EVENTS.map((e) => e.event).filter((e) => events.has(e)),
        ...(description.trim() ? { description: description.trim() } : {}),
      };
      setCreated(await api.post<CreatedWebhook>('/api/webhooks', body, { headers: { 'idempotency-key': crypto.randomUUID() } }));
      setUrl('');
      setDescription('');
      onCreated();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="card" aria-labelledby="new-webhook-title">
      <h2 id="new-webhook-title">Add an endpoint</h2>
      <form className="form" onSubmit={submit}>
        <label>
          Endpoint URL
          <input
            type="url"
            name="url"
            required
            placeholder="https://example.com/imgapi-events"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
          />
        </label>
        <fieldset className="events">
          <legend>Events</legend>
          {EVENTS.map(({ event, help }) => (
            <label key={event} className="inline-label">
              <input
                type="checkbox"
                checked={events.has(event)}
                onChange={(e) =>
                  setEvents((current) => {
                    const next = new Set(current);
                    if (e.target.checked) next.add(event);
                    else next.delete(event);
                    return next;
                  })
                }
              />
              <code>{event}</code> <span className="muted small">{help}</span>
            </label>
          ))}
        </fieldset>
        <label>
          <span>
            Description <span className="muted small">(optional)</span>
          </span>
          <input name="description" maxLength={200} value={description} onChange={(e) => setDescription(e.target.value)} />
        </label>
        <ErrorBox error={error} />
        <div>
          <button type="submit" disabled={busy}>
            {busy ? 'Adding…' : 'Add endpoint'}
          </button>
        </div>
      </form>
      {created && (
        <div className="secret" data-testid="new-webhook">
          <p>
            <strong>Signing secret for {created.url}</strong> — shown only now. Verify each delivery's <code>Imgapi-Signature</code> with it (the
            SDK's <code>verifyWebhook</code> does).
          </p>
          <div className="secret-row">
            <code className="secret-value" data-testid="new-webhook-secret">
              {created.secret}
            </code>
            <CopyButton text={created.secret} />
          </div>
        </div>
      )}
    </section>
  );
}

function Deliveries({ webhook }: { webhook: Webhook }) {
  const list = usePagedList<{ deliveries: Delivery[]; nextCursor: string | null }>(
    `/api/webhooks/${encodeURIComponent(webhook.webhookId)}/deliveries`,
    {
      limit: '20',
    },
  );
  const [error, setError] = useState<unknown>();
  const [notice, setNotice] = useState<string>();
  const act = async (path: string, done: string) => {
    setError(undefined);
    setNotice(undefined);
    try {
      await api.post(path, undefined, { headers: { 'idempotency-key': crypto.randomUUID() } });
      setNotice(done);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const base = `/api/webhooks/${encodeURIComponent(webhook.webhookId)}`;
  const columns: Column<Delivery>[] = [
    { header: 'Event', cell: (d) => <code>{d.event}</code> },
    {
      header: 'Status',
      cell: (d) => (
        <div>
          <span className={`badge ${STATUS_CLASS[d.status]}`}>{d.status}</span>
          {d.status === 'pending' && d.nextAttemptAt && <div className="muted small">next try {relative(d.nextAttemptAt)}</div>}
        </div>
      ),
    },
    { header: 'Attempts', cell: (d) => d.attempts },
    {
      header: 'Last answer',
      className: 'wrap',
      cell: (d) => (
        <div>
          {d.statusCode !== undefined ? `HTTP ${d.statusCode}` : d.attempts > 0 ? 'no answer' : '—'}
          {d.durationMs !== undefined && <span className="muted small"> · {d.durationMs} ms</span>}
          {d.error && <div className="error-text small">{d.error}</div>}
        </div>
      ),
    },
    { header: 'Created', title: (d) => d.createdAt, cell: (d) => dateTime(d.createdAt) },
    {
      label: 'Actions',
      cell: (d) => (
        <div className="actions">
          <button
            type="button"
            className="secondary small"
            onClick={() => act(`${base}/deliveries/${encodeURIComponent(d.deliveryId)}/resend`, `Queued ${d.event} again.`)}
          >
            Resend
          </button>
        </div>
      ),
    },
  ];
  return (
    <section className="card" data-testid="deliveries" aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">
        Deliveries to <span className="wrap">{webhook.url}</span>
      </h2>
      <div className="toolbar">
        <button type="button" onClick={() => act(`${base}/test`, 'Queued a webhook.test event.')}>
          Send test event
        </button>
        <button type="button" className="secondary" onClick={list.reload}>
          Refresh
        </button>
      </div>
      <ErrorBox error={error ?? list.error} onRetry={list.error ? list.reload : undefined} />
      {notice && (
        <div className="notice ok" role="status">
          {notice}
        </div>
      )}
      <DataTable
        compact
        testId="deliveries-table"
        caption="Deliveries"
        rows={list.data?.deliveries ?? []}
        columns={columns}
        rowKey={(d) => d.deliveryId}
        rowAttributes={(d) => ({ 'data-status': d.status })}
        empty="No deliveries yet. Send a test event, or run a task."
        loading={list.loading}
        error={list.error}
      />
      <Pager list={list} />
    </section>
  );
}

export function WebhooksPage() {
  const list = useAsync((signal) => api.get<{ webhooks: Webhook[]; limit: number }>('/api/webhooks', { signal }), []);
  const [selected, setSelected] = useState<string>();
  const [deleting, setDeleting] = useState<Webhook>();
  const [error, setError] = useState<unknown>();
  const webhooks = list.data?.webhooks ?? [];
  const current = webhooks.find((w) => w.webhookId === selected);
  const remove = async (webhook: Webhook) => {
    setDeleting(undefined);
    setError(undefined);
    try {
      await api.del(`/api/webhooks/${encodeURIComponent(webhook.webhookId)}`);
      if (selected === webhook.webhookId) setSelected(undefined);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const columns: Column<Webhook>[] = [
    {
      header: 'Endpoint',
      className: 'wrap',
      cell: (w) => (
        <div>
          <code>{w.url}</code>
          {w.description && <div className="muted small">{w.description}</div>}
        </div>
      ),
    },
    { header: 'Events', className: 'wrap', cell: (w) => w.events.join(', ') },
    { header: 'Created', title: (w) => w.createdAt, cell: (w) => dateTime(w.createdAt) },
    {
      label: 'Actions',
      cell: (w) => (
        <div className="actions">
          <button
            type="button"
            className="secondary"
            onClick={() => setSelected(w.webhookId)}
            aria-label={`Deliveries to ${w.url}`}
            aria-pressed={selected === w.webhookId}
          >
            Deliveries
          </button>
          <button type="button" className="secondary" onClick={() => setDeleting(w)} aria-label={`Delete ${w.url}`}>
            Delete
          </button>
        </div>
      ),
    },
  ];
  return (
    <>
      <PageTitle title="Webhooks" />
      <p className="muted">
        Instead of polling, have imgapi POST each finished task or batch to your server, signed with the endpoint's secret. See the Webhooks section
        of <a href="/docs">the API reference</a>.
      </p>
      <CreateCard onCreated={list.reload} />
      <section className="card" aria-labelledby="webhooks-title">
        <h2 id="webhooks-title">
          Endpoints{' '}
          {list.data && (
            <span className="muted small">
              ({webhooks.length} of {list.data.limit})
            </span>
          )}
        </h2>
        <ErrorBox error={error ?? list.error} onRetry={list.error ? list.reload : undefined} />
        <DataTable
          testId="webhooks-table"
          caption="Webhook endpoints"
          rows={webhooks}
          columns={columns}
          rowKey={(w) => w.webhookId}
          rowAttributes={(w) => ({ 'data-webhook-id': w.webhookId })}
          empty="No endpoints yet."
          loading={list.loading}
          error={list.error}
        />
      </section>
      {current && <Deliveries key={current.webhookId} webhook={current} />}
      <ConfirmDialog
        open={!!deleting}
        title="Delete this endpoint?"
        confirmLabel="Delete endpoint"
        danger
        onCancel={() => setDeleting(undefined)}
        onConfirm={() => deleting && remove(deleting)}
      >
        {deleting && (
          <p>
            Events stop going to <strong className="wrap">{deleting.url}</strong>; its pending deliveries are not sent and its delivery log is
            deleted.
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}
