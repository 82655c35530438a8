// "API request" panels: the code behind what the dashboard just did (a playground run, a task,
// a new key), as curl, SDK and CLI, with a copy button (api-snippets.ts writes the code). Also
// the getting-started panel an empty account sees, and "Test this key".
import { useEffect, useState } from 'react';
import { api, type ApiTask } from './api';
import { firstCallSnippet, jobSnippet, LANGUAGES, type JobCall, type Language } from './api-snippets';
import { CopyButton } from './components';
import { Link } from './router';
import './playground.css';

function SnippetTabs({ code, title, testId }: { code: (language: Language) => string; title: string; testId: string }) {
  const [language, setLanguage] = useState<Language>('curl');
  const text = code(language);
  return (
    <div className="snippets" data-testid={testId}>
      <div className="snippet-bar">
        <div className="snippet-tabs" role="tablist" aria-label={title}>
          {LANGUAGES.map((l) => (
            <button
              key={l.id}
              type="button"
              role="tab"
              aria-selected={l.id === language}
              className={l.id === language ? 'tab active' : 'tab'}
              onClick={() => setLanguage(l.id)}
              data-language={l.id}
            >
              {l.label}
            </button>
          ))}
        </div>
        <CopyButton text={text} label={`Copy as ${LANGUAGES.find((l) => l.id === language)!.label}`} />
      </div>
      <pre className="snippet" role="tabpanel" tabIndex={0} aria-label={`${title}: ${language}`} data-language={language}>
        <code>{text}</code>
      </pre>
    </div>
  );
}

/** The request that reproduces a job exactly, as curl, SDK and CLI. */
export function ApiRequestPanel({ call, heading = 'API request' }: { call: JobCall; heading?: string }) {
  return (
    <details className="api-request" data-testid="api-request">
      <summary>{heading}</summary>
      <p className="muted small">
        The same job from your own code: <code>POST {call.mode === 'batch' ? `/api/process/batch/${call.kind}` : `/api/process/${call.kind}`}</code>{' '}
        with the body below, then poll and download. Your API key goes in <code>x-api-key</code> (<Link to="/keys">API keys</Link>).
      </p>
      {call.note && <p className="muted small">{call.note}</p>}
      <SnippetTabs title={heading} testId="api-request-code" code={(language) => jobSnippet(language, call)} />
      <p className="muted small">
        Rather than polling: a <Link to="/webhooks">webhook</Link> sends <code>task.completed</code> (or <code>task.failed</code>,{' '}
        <code>batch.completed</code>) to your URL, signed with its secret.
      </p>
    </details>
  );
}

/** The call behind a task, from its stored input and options. */
function taskCall(task: ApiTask, origin = location.origin): JobCall {
  const input: Record<string, unknown> = task.input.fileIds ? { fileIds: task.input.fileIds } : { fileId: task.input.fileId };
  return {
    origin,
    kind: task.type,
    mode: task.input.fileIds ? 'multi' : 'single',
    body: { ...input, ...(task.options as Record<string, unknown>) },
    inputNames: [],
  };
}

/** The task page's panel (pages/tasks.tsx renders it). */
export function TaskApiRequest({ task }: { task: ApiTask }) {
  // The inputs' names, for the CLI (which takes local files): one metadata read per input.
  const ids = (task.input.fileIds ?? (task.input.fileId ? [task.input.fileId] : [])).join(',');
  const [names, setNames] = useState<string[]>([]);
  useEffect(() => {
    const controller = new AbortController();
    Promise.all(
      ids
        .split(',')
        .filter(Boolean)
        .map((id) => api.get<{ filename: string }>(`/api/files/${encodeURIComponent(id)}`, { signal: controller.signal })),
    ).then(
      (files) => setNames(files.map((f) => f.filename)),
      () => undefined, // an expired input: the CLI line keeps a placeholder name
    );
    return () => controller.abort();
  }, [ids]);
  return (
    <section className="card">
      <ApiRequestPanel call={{ ...taskCall(task), inputNames: names }} />
    </section>
  );
}

/** Right after a key is created: how to call the API with it, and a live check (`onTested`: after it, so the list can show the use). */
export function NewKeySnippets({ apiKey, onTested }: { apiKey: string; onTested?: () => void }) {
  const [answer, setAnswer] = useState<{ status: number; text: string }>();
  const [testing, setTesting] = useState(false);
  const test = async () => {
    setTesting(true);
    try {
      // The key alone: no session cookie, exactly as a program would call.
      const response = await fetch('/api/account', { headers: { 'x-api-key': apiKey, accept: 'application/json' }, credentials: 'omit' });
      const text = await response.text();
      let pretty = text;
      try {
        pretty = JSON.stringify(JSON.parse(text), null, 2);
      } catch {
        // not JSON: shown as it came
      }
      setAnswer({ status: response.status, text: pretty });
    } catch (err) {
      setAnswer({ status: 0, text: (err as Error).message });
    } finally {
      setTesting(false);
      onTested?.();
    }
  };
  return (
    <div className="key-snippets">
      <h3>Call the API with it</h3>
      <p className="muted small">
        Base URL <code>{location.origin}</code>. Every <code>/api/*</code> request carries the key in <code>x-api-key</code>.
      </p>
      <SnippetTabs title="First calls with this key" testId="key-snippets" code={(language) => firstCallSnippet(language, location.origin, apiKey)} />
      <div className="run">
        <button type="button" className="secondary" onClick={test} disabled={testing} data-testid="test-key">
          {testing ? 'Testing…' : 'Test this key'}
        </button>
        <span className="muted small">
          calls <code>GET /api/account</code> with the key
        </span>
      </div>
      {answer && (
        <div
          className={answer.status >= 200 && answer.status < 300 ? 'key-answer ok' : 'key-answer failed'}
          data-testid="test-key-answer"
          role="status"
        >
          <strong>{answer.status ? `HTTP ${answer.status}` : 'No answer'}</strong>
          <pre className="snippet" tabIndex={0} aria-label="the answer to GET /api/account">
            <code>{answer.text}</code>
          </pre>
        </div>
      )}
    </div>
  );
}

/** An empty account's first steps: the typical flow, each with where to do it here. */
export function GettingStarted() {
  const [hidden, setHidden] = useState(false);
  const [empty, setEmpty] = useState<boolean>();
  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    Promise.all([
      api.get<{ files: unknown[] }>('/api/files?limit=1', { signal }),
      api.get<{ tasks: unknown[] }>('/api/tasks?limit=1', { signal }),
    ]).then(
      ([files, tasks]) => setEmpty(files.files.length === 0 && tasks.tasks.length === 0),
      () => setEmpty(false),
    );
    return () => controller.abort();
  }, []);
  if (!empty || hidden) return null;
  return (
    <section className="card getting-started" data-testid="getting-started" aria-labelledby="getting-started-title">
      <h2 id="getting-started-title">Getting started</h2>
      <p className="muted">Every job follows the same four steps, from the playground or from your code:</p>
      <ol className="steps">
        <li>
          <strong>Upload</strong> a file: <code>POST /api/upload</code> → a <code>fileId</code>.
        </li>
        <li>
          <strong>Start a job</strong>: <code>POST /api/process/resize</code> with the <code>fileId</code> and options → a <code>taskId</code>.
        </li>
        <li>
          <strong>Poll</strong> the task: <code>GET /api/tasks/{'{taskId}'}?wait=30</code> until it is <code>completed</code>.
        </li>
        <li>
          <strong>Download</strong> the output: <code>GET /api/download/{'{outputFileId}'}</code>.
        </li>
      </ol>
      <div className="run">
        <Link to="/playground" className="button">
          Try it in the playground
        </Link>
        <Link to="/keys">Create an API key</Link>
        <button type="button" className="link" onClick={() => setHidden(true)}>
          Hide
        </button>
      </div>
    </section>
  );
}
