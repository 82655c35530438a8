// How numbers and times read in the dashboard.
/** Sizes in binary units, labelled as such: 1 GiB is 1,073,741,824 bytes (the plans' limits are). */
export function bytes(n: number): string {
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export const count = (n: number) => n.toLocaleString('en-US');

/** A date and time in the browser's time zone, with the zone named ("22 Nov 2026, 14:05 GMT+1"). */
export function dateTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleString('en-GB', { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
}

/** When a quota resets: in the browser's zone and in UTC, the zone the server counts in. */
export function resetTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const local = dateTime(iso);
  const utc = new Date(iso).toLocaleString('en-GB', { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC' });
  return local.endsWith('UTC') ? local : `${local} (${utc} UTC)`;
}

export function relative(iso: string | null | undefined): string {
  if (!iso) return 'never';
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  const future = seconds < 0;
  const s = Math.abs(seconds);
  const text = s < 60 ? `${s} s` : s < 3600 ? `${Math.round(s / 60)} min` : s < 86_400 ? `${Math.round(s / 3600)} h` : `${Math.round(s / 86_400)} d`;
  if (s < 5) return 'just now';
  return future ? `in ${text}` : `${text} ago`;
}

export function seconds(n: number): string {
  if (n % 86_400 === 0) return `${n / 86_400} day${n === 86_400 ? '' : 's'}`;
  if (n % 3600 === 0) return `${n / 3600} hour${n === 3600 ? '' : 's'}`;
  return `${n} s`;
}

/** "monthlyTasks" → "Monthly tasks" */
const ACRONYMS: Record<string, string> = { api: 'API', id: 'ID', pdf: 'PDF', libreoffice: 'LibreOffice' };

export function label(name: string): string {
  if (/FileId$/.test(name)) return label(name.replace(/FileId$/, '')) + ' file';
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/[-_]/g, ' ')
    .toLowerCase();
  const text = words
    .split(' ')
    .map((w) => ACRONYMS[w] ?? w)
    .join(' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}
