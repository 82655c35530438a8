// Files: newest first, with thumbnails (GET /api/preview), download links and delete.
import { useState } from 'react';
import { api, downloadUrl, type ApiFile } from '../api';
import { ErrorBox, PageTitle, Pager, Thumb, useAsync, useCursorPages } from '../components';
import { bytes, dateTime, relative } from '../format';
import { Link } from '../router';

export function FilesPage() {
  const pages = useCursorPages();
  const list = useAsync(
    (signal) => api.get<{ files: ApiFile[]; nextCursor: string | null }>(`/api/files?limit=20${pages.cursor ? `&cursor=${encodeURIComponent(pages.cursor)}` : ''}`, { signal }),
    [pages.cursor],
  );
  const [error, setError] = useState<unknown>();
  const remove = async (fileId: string) => {
    setError(undefined);
    try {
      await api.del(`/api/files/${encodeURIComponent(fileId)}`);
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const files = list.data?.files ?? [];
  return (
    <>
      <PageTitle title="Files">
        <Link to="/playground" className="button">
          Upload in the playground
        </Link>
      </PageTitle>
      <ErrorBox error={error ?? list.error} />
      <section className="card">
        {files.length === 0 ? (
          <p className="muted">{list.loading ? 'Loading…' : 'No files. Uploads and task outputs appear here until they expire.'}</p>
        ) : (
          <table className="table" data-testid="files-table">
            <thead>
              <tr>
                <th />
                <th>Name</th>
                <th>Format</th>
                <th>Size</th>
                <th>Origin</th>
                <th>Created</th>
                <th>Expires</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {files.map((file) => (
                <tr key={file.fileId} data-file-id={file.fileId}>
                  <td>
                    <Thumb fileId={file.fileId} format={file.format} alt={file.filename} box={128} />
                  </td>
                  <td className="wrap">
                    <div>{file.filename}</div>
                    <div className="muted small">
                      <code>{file.fileId}</code>
                    </div>
                  </td>
                  <td>
                    {file.format}
                    {file.width && file.height ? <div className="muted small">{`${file.width}×${file.height}`}{file.pages ? ` · ${file.pages} frames` : ''}</div> : null}
                  </td>
                  <td>{bytes(file.size)}</td>
                  <td>{file.origin === 'output' && file.taskId ? <Link to={`/tasks/${file.taskId}`}>output</Link> : 'upload'}</td>
                  <td title={file.createdAt}>{dateTime(file.createdAt)}</td>
                  <td title={file.expiresAt}>{relative(file.expiresAt)}</td>
                  <td>
<div className="actions">
                    <a className="button secondary" href={downloadUrl(file.fileId)} download={file.filename}>
                      Download
                    </a>
                    <button type="button" className="secondary" onClick={() => remove(file.fileId)}>
                      Delete
                    </button>
                  </div>
</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <Pager page={pages.page} hasNext={!!list.data?.nextCursor} onNext={() => list.data?.nextCursor && pages.next(list.data.nextCursor)} onPrevious={pages.previous} />
      </section>
    </>
  );
}
