// One file: its preview and what GET /api/files/{id}/info says of it (size, colour, EXIF, GPS,
// palette, hashes). With `?faces=1` in the address (the "Find faces" button sets it, so a link
// keeps it), info is asked for the faces too and their boxes are drawn over the preview.
import type { components } from '../../../sdk/openapi';
import { api, downloadUrl, type ApiFile } from '../api';
import { ErrorBox, PageTitle, RegionBox, useAsync, usePreview } from '../components';
import { bytes, dateTime } from '../format';
import { Link, navigate, useLocation } from '../router';

type FileInfo = components['schemas']['FileInfo'];

/** The preview's box: large enough for a detail view, small enough to load at once. */
const PREVIEW_BOX = 1024;
/** EXIF tags shown (when present), in this order; the rest are in the API's answer. */
const EXIF_SHOWN = ['Make', 'Model', 'LensModel', 'DateTimeOriginal', 'ExposureTime', 'FNumber', 'ISO', 'FocalLength', 'Software'];

export function FilePage({ fileId }: { fileId: string }) {
  const { path, query } = useLocation();
  const withFaces = query.get('faces') === '1';
  const id = encodeURIComponent(fileId);
  const file = useAsync((signal) => api.get<ApiFile>(`/api/files/${id}`, { signal }), [fileId]);
  const info = useAsync((signal) => api.get<FileInfo>(`/api/files/${id}/info${withFaces ? '?faces=1' : ''}`, { signal }), [fileId, withFaces]);
  const name = file.data?.filename ?? fileId;
  return (
    <>
      <PageTitle title="File">
        <Link to="/files">All files</Link>
      </PageTitle>
      <ErrorBox error={file.error} onRetry={file.reload} />
      {file.data && (
        <div className="grid two">
          <section className="card" aria-label="Preview">
            <h2 className="wrap">{name}</h2>
            <FacePreview fileId={fileId} alt={name} info={info.data} withFaces={withFaces} />
            <div className="actions">
              {withFaces ? (
                <button type="button" className="secondary" onClick={() => navigate(path, { replace: true })}>
                  Hide faces
                </button>
              ) : (
                <button type="button" className="secondary" onClick={() => navigate(`${path}?faces=1`, { replace: true })}>
                  Find faces
                </button>
              )}
              <a className="button secondary" href={downloadUrl(fileId)} download={name}>
                Download
              </a>
            </div>
          </section>
          <section className="card" aria-label="Info">
            <h2>Info</h2>
            <ErrorBox error={info.error} onRetry={info.reload} />
            {info.loading && !info.data && <p className="muted">Loading…</p>}
            <InfoTable file={file.data} info={info.data} />
          </section>
        </div>
      )}
    </>
  );
}

/**
 * The preview, and over it a box per face: placed in percent of the image's size, so they follow
 * the image at whatever size it is shown (the preview is the upright image, scaled).
 */
function FacePreview({ fileId, alt, info, withFaces }: { fileId: string; alt: string; info?: FileInfo; withFaces: boolean }) {
  const { src, failed } = usePreview(fileId, PREVIEW_BOX);
  const faces = withFaces ? info?.faces : undefined;
  if (!src) return <div className="face-preview-empty muted">{failed ? 'No preview for this file.' : 'Loading…'}</div>;
  return (
    <div className="face-preview">
      <div className="face-frame" data-testid="face-frame">
        <img src={src} alt={alt} data-testid="file-preview" />
        {faces && info && faces.map((face, i) => <RegionBox key={i} box={face} width={info.width} height={info.height} />)}
      </div>
      {withFaces && (
        <p className="muted small" role="status">
          {!faces
            ? 'Looking for faces…'
            : faces.length === 0
              ? 'No faces found.'
              : faces.length === 1
                ? '1 face found.'
                : `${faces.length} faces found.`}
        </p>
      )}
    </div>
  );
}

function InfoTable({ file, info }: { file: ApiFile; info?: FileInfo }) {
  const exif = info?.exif ?? {};
  const shown = EXIF_SHOWN.filter((tag) => exif[tag] !== undefined && exif[tag] !== null);
  return (
    <table className="table compact">
      <tbody>
        <tr>
          <th scope="row">File</th>
          <td className="wrap">
            <code>{file.fileId}</code>
            <div className="muted small">
              {bytes(file.size)} · uploaded {dateTime(file.createdAt)}
            </div>
          </td>
        </tr>
        {info && (
          <>
            <tr>
              <th scope="row">Image</th>
              <td className="wrap">
                {info.format} · {info.width}×{info.height}
                {info.pages > 1 ? ` · ${info.pages} frames` : ''}
                {info.hasAlpha ? ' · alpha' : ''} · {info.colorSpace}
                {info.orientation !== 1 ? ` · EXIF orientation ${info.orientation}` : ''}
              </td>
            </tr>
            <tr>
              <th scope="row">Palette</th>
              <td className="wrap">
                <span className="palette">
                  {info.palette.map((colour) => (
                    <span key={colour} className="swatch" style={{ background: colour }} title={colour} />
                  ))}
                </span>
                <span className="muted small"> dominant {info.dominant}</span>
              </td>
            </tr>
            <tr>
              <th scope="row">Location</th>
              <td>{info.gps ? `${info.gps.latitude.toFixed(5)}, ${info.gps.longitude.toFixed(5)}` : <span className="muted">none</span>}</td>
            </tr>
            {shown.map((tag) => (
              <tr key={tag}>
                <th scope="row">{tag}</th>
                <td className="wrap">{String(exif[tag])}</td>
              </tr>
            ))}
            <tr>
              <th scope="row">Perceptual hash</th>
              <td>
                <code>{info.phash}</code>
              </td>
            </tr>
          </>
        )}
      </tbody>
    </table>
  );
}
