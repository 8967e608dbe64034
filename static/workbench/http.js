// How every page talks to the server: the CSRF token, JSON in and out, and failures raised as an
// HttpError whose message is the server's own words ("field: message"), so a page shows what
// went wrong rather than a status code.

// base.html renders the token into <meta name="csrf-token"> on every page: one place to read it,
// and it works with an HttpOnly cookie too.
export function csrfToken() {
  return document.querySelector("meta[name=csrf-token]")?.content || "";
}

function csrfHeader() {
  return { "X-CSRFToken": csrfToken() };
}

export class HttpError extends Error {
  constructor(message, { status = 0, body = null } = {}) {
    super(message);
    this.name = "HttpError";
    this.status = status; // 0: no answer at all (connection lost)
    this.body = body; // the parsed JSON answer, or null: pages that show errors per field read it
  }
}

const prefixed = (field, text) => (!field || field === "__all__" || field === "non_field_errors" ? text : `${field}: ${text}`);

// One readable line from the error shapes the server sends: DRF's {"detail": ...}, {"error": ...},
// field errors {"field": ["message", ...]} (bare or under "errors"), or [{field, message}, ...].
export function errorText(body) {
  if (body === null || body === undefined) return "";
  if (Array.isArray(body)) {
    return body.map(errorText).filter(Boolean).join(body.some((item) => typeof item === "object") ? "; " : " ");
  }
  if (typeof body !== "object") return String(body);
  if ("detail" in body) return errorText(body.detail);
  if ("error" in body) return errorText(body.error);
  if ("errors" in body) return errorText(body.errors);
  if ("field" in body && "message" in body) return prefixed(body.field, errorText(body.message));
  return Object.entries(body).map(([field, value]) => prefixed(field, errorText(value))).join("; ");
}

function failure(status, statusText, body) {
  return new HttpError(errorText(body) || statusText || `HTTP ${status}`, { status, body });
}

// The answer as {status, body} for a 2xx answer (body null for 204), an HttpError otherwise.
// Pages that need the status of a success (202: not ready yet) use this; others use the three below.
export async function requestJSON(url, { method = "GET", body, headers = {} } = {}) {
  const unsafe = !["GET", "HEAD"].includes(method);
  const options = {
    method, body, credentials: "same-origin",
    headers: { Accept: "application/json", ...(unsafe ? csrfHeader() : {}), ...headers },
  };
  let response;
  try {
    response = await fetch(url, options);
  } catch {
    throw new HttpError("connection lost", { status: 0 });
  }
  const json = (response.headers.get("Content-Type") || "").includes("json");
  const data = json ? await response.json().catch(() => null) : null;
  if (!response.ok) throw failure(response.status, response.statusText, data);
  if (response.status === 204) return { status: 204, body: null };
  // A 200 that is not JSON is the login page after a redirect: the session has ended.
  if (!json) {
    throw new HttpError("The server did not answer with JSON: is your session still open? Reload the page.", {
      status: response.status,
    });
  }
  return { status: response.status, body: data };
}

export async function getJSON(url) {
  return (await requestJSON(url)).body;
}

// A page of the workbench itself, as HTML (the dashboard reads itself again to redraw its cards).
export async function getPage(url) {
  let response;
  try {
    response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
  } catch {
    throw new HttpError("connection lost", { status: 0 });
  }
  if (!response.ok) throw failure(response.status, response.statusText, null);
  return response.text();
}

// `body` is sent as JSON; leave it out for a bare POST.
export async function sendJSON(url, { method = "POST", body } = {}) {
  const json = body === undefined ? {} : { body: JSON.stringify(body), headers: { "Content-Type": "application/json" } };
  return (await requestJSON(url, { method, ...json })).body;
}

// A FormData (files included); the browser sets the multipart Content-Type.
export async function postForm(url, formData) {
  return (await requestJSON(url, { method: "POST", body: formData })).body;
}

// XHR, not fetch: only XHR reports upload progress. `onProgress(bytesSent)`.
export function sendWithProgress(url, { method = "PUT", body, headers = {}, onProgress } = {}) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(method, url);
    for (const [name, value] of Object.entries({ Accept: "application/json", ...csrfHeader(), ...headers })) {
      xhr.setRequestHeader(name, value);
    }
    if (onProgress) xhr.upload.addEventListener("progress", (event) => onProgress(event.loaded));
    xhr.addEventListener("load", () => {
      let data = null;
      try { data = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(data ?? {});
      else reject(failure(xhr.status, xhr.statusText, data));
    });
    xhr.addEventListener("error", () => reject(new HttpError("connection lost", { status: 0 })));
    xhr.send(body);
  });
}
