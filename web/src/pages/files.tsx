// Files: newest first, with thumbnails (GET /api/preview), download links and delete.
import { useState } from 'react';
import { api, downloadUrl, type ApiFile } from '../api';
import { ErrorBox, PageTitle, Thumb } from '../components';
import { DataTable, Pager, usePagedList, type Column } from '../data-table';
import { bytes, dateTime, relative } from '../format';
import { Link } from '../router';

export function FilesPage() {
  const list = usePagedList<{ files: ApiFile[]; nextCursor: string | null }>('/api/files', { limit: '20' });
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
  const columns: Column<ApiFile>[] = [
    { cell: (file) => <Thumb fileId={file.fileId} format={file.format} alt={file.filename} box={128} /> },
    {
      header: 'Name',
      className: 'wrap',
      cell: (file) => (
        <>
          <div>{file.filename}</div>
          <div className="muted small">
            <code>{file.fileId}</code>
          </div>
        </>
      ),
    },
    {
      header: 'Format',
      cell: (file) => (
        <>
          {file.format}
          {file.width && file.height ? (
            <div className="muted small">
              {`${file.width}×${file.height}`}
              {file.pages ? ` · ${file.pages} frames` : ''}
            </div>
          ) : null}
        </>
      ),
    },
    { header: 'Size', cell: (file) => bytes(file.size) },
    { header: 'Origin', cell: (file) => (file.origin === 'output' && file.taskId ? <Link to={`/tasks/${file.taskId}`}>output</Link> : 'upload') },
    { header: 'Created', title: (file) => file.createdAt, cell: (file) => dateTime(file.createdAt) },
    { header: 'Expires', title: (file) => file.expiresAt, cell: (file) => relative(file.expiresAt) },
    {
      cell: (file) => (
        <div className="actions">
          <a className="button secondary" href={downloadUrl(file.fileId)} download={file.filename}>
            Download
          </a>
          <Link to={`/playground?fileId=${encodeURIComponent(file.fileId)}`} className="button secondary" title={`Open ${file.filename} in the playground`}>
            Open in playground
          </Link>
          <button type="button" className="secondary" onClick={() => remove(file.fileId)}>
            Delete
          </button>
        </div>
      ),
    },
  ];
  return (
    <>
      <PageTitle title="Files">
        <Link to="/playground" className="button">
          Upload in the playground
        </Link>
      </PageTitle>
      <ErrorBox error={error ?? list.error} />
      <section className="card">
        <DataTable
          testId="files-table"
          rows={list.data?.files ?? []}
          columns={columns}
          rowKey={(file) => file.fileId}
          rowAttributes={(file) => ({ 'data-file-id': file.fileId })}
          empty="No files. Uploads and task outputs appear here until they expire."
          loading={list.loading}
        />
        <Pager list={list} />
      </section>
    </>
  );
}
