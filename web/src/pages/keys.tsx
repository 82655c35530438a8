// API keys: create (shown once, with a copy button, the first calls with it as curl, SDK and CLI,
// and "Test this key"), list with prefix and times, revoke.
import { useState, type FormEvent } from 'react';
import { api } from '../api';
import { NewKeySnippets } from '../api-request';
import { CopyButton, ErrorBox, PageTitle, useAsync } from '../components';
import { DataTable, type Column } from '../data-table';
import { dateTime, relative } from '../format';

interface Key {
  keyId: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

interface Created extends Key {
  key: string;
}

export function KeysPage() {
  const list = useAsync((signal) => api.get<{ apiAccess: boolean; keys: Key[] }>('/dashboard-api/keys', { signal }), []);
  const [name, setName] = useState('');
  const [created, setCreated] = useState<Created>();
  const [error, setError] = useState<unknown>();
  const [confirming, setConfirming] = useState<string>();

  const create = async (event: FormEvent) => {
    event.preventDefault();
    setError(undefined);
    try {
      setCreated(await api.post<Created>('/dashboard-api/keys', { name }));
      setName('');
      list.reload();
    } catch (err) {
      setError(err);
    }
  };

  const revoke = async (keyId: string) => {
    setError(undefined);
    try {
      await api.del(`/dashboard-api/keys/${encodeURIComponent(keyId)}`);
      setConfirming(undefined);
      if (created?.keyId === keyId) setCreated(undefined);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };

  const columns: Column<Key>[] = [
    { header: 'Name', cell: (key) => key.name },
    { header: 'Key', cell: (key) => <code>{key.prefix}…</code> },
    { header: 'Created', title: (key) => key.createdAt, cell: (key) => dateTime(key.createdAt) },
    { header: 'Last used', title: (key) => key.lastUsedAt ?? undefined, cell: (key) => relative(key.lastUsedAt) },
    {
      header: 'Status',
      cell: (key) =>
        key.revokedAt ? (
          <span className="badge status-canceled">revoked {relative(key.revokedAt)}</span>
        ) : (
          <span className="badge status-completed">active</span>
        ),
    },
    {
      cell: (key) => (
        <div className="actions">
          {!key.revokedAt &&
            (confirming === key.keyId ? (
              <>
                <button type="button" className="danger" onClick={() => revoke(key.keyId)}>
                  Confirm revoke
                </button>
                <button type="button" className="secondary" onClick={() => setConfirming(undefined)}>
                  Keep
                </button>
              </>
            ) : (
              <button type="button" className="secondary" onClick={() => setConfirming(key.keyId)}>
                Revoke
              </button>
            ))}
        </div>
      ),
    },
  ];
  return (
    <>
      <PageTitle title="API keys" />
      {list.data && !list.data.apiAccess && (
        <div className="notice">Your plan has no API access: keys are refused (403 PLAN_NO_API_ACCESS) until the account moves to Pro or Max.</div>
      )}
      <section className="card">
        <h2>Create a key</h2>
        <form onSubmit={create} className="form inline">
          <label>
            Name
            <input name="keyName" placeholder="e.g. production, ci" maxLength={100} required value={name} onChange={(e) => setName(e.target.value)} />
          </label>
          <button type="submit">Create key</button>
        </form>
        {created && (
          <div className="secret" data-testid="new-key">
            <p>
              <strong>{created.name}</strong>: copy the key now. It is shown only this once; the server keeps only its hash.
            </p>
            <div className="secret-row">
              <code className="secret-value" data-testid="new-key-value">
                {created.key}
              </code>
              <CopyButton text={created.key} />
            </div>
            <NewKeySnippets apiKey={created.key} onTested={list.reload} />
          </div>
        )}
        <ErrorBox error={error ?? list.error} />
      </section>
      <section className="card">
        <h2>Your keys</h2>
        <DataTable
          testId="keys-table"
          rows={list.data?.keys ?? []}
          columns={columns}
          rowKey={(key) => key.keyId}
          rowAttributes={(key) => ({ 'data-key-id': key.keyId })}
          empty="No keys yet."
          loading={list.loading}
          error={list.error}
        />
      </section>
    </>
  );
}
