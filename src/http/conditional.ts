// Conditional requests (RFC 9110 §13) for the routes that serve bytes with a strong ETag: file
// downloads and delivery URLs. Neither sends Last-Modified, so a date never matches.

/** Whether If-None-Match names the ETag: a list, weak forms and `*` included (the weak comparison §13.1.2 asks for). */
export function noneMatch(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const value = tag.trim();
    return value === '*' || value.replace(/^W\//, '') === etag;
  });
}

/**
 * Whether a Range is to be honoured under If-Range (§13.1.5): without it, yes; with it, only when
 * it is this strong ETag exactly (a weak tag or a date never is). Otherwise the whole
 * representation is sent: the client holds other bytes than these.
 */
export function rangeApplies(ifRange: string | undefined, etag: string): boolean {
  return ifRange === undefined || ifRange.trim() === etag;
}
