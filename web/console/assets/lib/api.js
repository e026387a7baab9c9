// The REST API client: JSON in and out, the CSRF header on writes, one error type.

export class ApiError extends Error {
  // status: HTTP status (0 for a network failure); code: the API's error code;
  // fields: [{field, message}] from error.details (validation errors), possibly empty.
  constructor(status, code, message, fields = [], details = null) {
    super(message || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code || "";
    this.fields = fields;
    this.details = details;
  }
}

// fieldsOf normalises error.details: a list of {field, message} or a map field -> message.
export function fieldsOf(details) {
  if (!details) return [];
  if (Array.isArray(details)) {
    return details.filter(d => d && typeof d === "object" && d.field)
      .map(d => ({ field: String(d.field), message: String(d.message || "invalid") }));
  }
  if (typeof details === "object") {
    return Object.entries(details).map(([field, message]) => ({ field, message: typeof message === "string" ? message : JSON.stringify(message) }));
  }
  return [];
}

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return "";
}

export class Client {
  constructor() {
    this.csrf = "";
    // onUnauthorized is called when an authenticated call answers 401 (session expired).
    this.onUnauthorized = null;
  }

  csrfToken() {
    return this.csrf || cookie("vmvault_csrf");
  }

  // call(method, path, body) -> parsed JSON (null for 204). path may omit the /api/v1 prefix.
  async call(method, path, body, { quiet401 = false } = {}) {
    const url = path.startsWith("/api/") ? path : `/api/v1${path.startsWith("/") ? "" : "/"}${path}`;
    const headers = { Accept: "application/json" };
    const init = { method, headers, credentials: "same-origin", cache: "no-store" };
    if (method !== "GET" && method !== "HEAD") {
      const t = this.csrfToken();
      if (t) headers["X-CSRF-Token"] = t;
    }
    if (body !== undefined && body !== null) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(url, init);
    } catch (e) {
      throw new ApiError(0, "network", "The appliance cannot be reached. Check the connection and try again.");
    }
    if (res.status === 204) return null;
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!res.ok) {
      const e = data && data.error ? data.error : {};
      const err = new ApiError(res.status, e.code || `http_${res.status}`, e.message || res.statusText || `HTTP ${res.status}`, fieldsOf(e.details), e.details || null);
      if (res.status === 401 && !quiet401 && this.onUnauthorized) this.onUnauthorized(err);
      throw err;
    }
    return data;
  }
}
