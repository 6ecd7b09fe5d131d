// The signed-in user of this tab: login, Basic credentials and groups, kept in sessionStorage
// only (one tab, gone when the tab closes; never a cookie, never localStorage).

const KEY = 'annal.session';

/** `{ user, token, groups, fullName }` or null. */
export function current() {
  try {
    const v = JSON.parse(sessionStorage.getItem(KEY) || 'null');
    return v && typeof v.token === 'string' ? v : null;
  } catch {
    return null;
  }
}

export function save(session) {
  sessionStorage.setItem(KEY, JSON.stringify(session));
}

export function clear() {
  sessionStorage.removeItem(KEY);
}

/** The `Authorization` header value for a login and password (UTF-8, base64). */
export function basic(user, password) {
  const raw = new TextEncoder().encode(`${user}:${password}`);
  let bin = '';
  for (const b of raw) bin += String.fromCharCode(b);
  return 'Basic ' + btoa(bin);
}

export function groups() {
  return current()?.groups || [];
}

export function isAdmin() {
  return groups().includes('$admins');
}

/** `$ops` or `$admins` (the API's Ops level). */
export function isOps() {
  return isAdmin() || groups().includes('$ops');
}
