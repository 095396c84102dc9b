// The three ways a real site drifts (docs/reliability.md, issue 28), as a mode of the mock sites' stream
// encoding and endpoint layer (the replies themselves are untouched):
//
// - `field`: the JSON field that carries the text is renamed. Same-length renames of the site's
//   text keys over the whole body, so binary framing (Kimi's Connect lengths) and the chunking
//   stay valid. Doubao keeps its `tts_content` mirror, as on the real site. Gemini (text by array
//   position) and Xinghuo (base64 pieces, no field) have no field to rename: `null`.
// - `endpoint`: the stream endpoint moves. The page (loaded with `?mock_drift=endpoint`) posts to
//   `/drift-v2` + the old path; the server answers it as before.
// - `json`: the site answers one plain JSON object instead of its stream.
//
// In every mode the page also renders the reply as the real site's markup (see page.js), so the
// tab's page-reading fallback has what a person sees.

export const DRIFTS = ['field', 'endpoint', 'json'];

/** Path prefix of the moved endpoint. */
export const MOVED_PREFIX = '/drift-v2';

/** Per site, the same-length renames of its text fields (`from` → `to`, every occurrence). */
export const FIELD_RENAMES = {
  deepseek: [['content', 'contenu']],
  doubao: [['"text":', '"txet":']],
  yuanbao: [['"msg":', '"gsm":']],
  qianwen: [['"content":', '"contenu":']],
  chatgpt: [['parts', 'partz']],
  claude: [['"text":', '"txet":'], ['"completion":', '"completiom":']],
  gemini: null,
  kimi: [['content', 'contenu'], ['"text":', '"txet":']],
  chatglm: [['"text":', '"txet":']],
  yiyan: [['"content":', '"contenu":'], ['"text":', '"txet":'], ['"tokens_all":', '"tokens_lla":']],
  xinghuo: null,
  sim: [['"delta":', '"dleta":']],
};

/** True when `site` can drift that way. */
export function canDrift(site, mode) {
  if (!DRIFTS.includes(mode)) return false;
  return mode !== 'field' || Array.isArray(FIELD_RENAMES[site]);
}

const toBuffer = (c) => (typeof c === 'string' ? Buffer.from(c, 'utf8') : Buffer.from(c));

/**
 * The chunks of a drifted reply (`field`: renamed, same chunk sizes; `json`: one JSON body) and
 * its content type; `endpoint` leaves the stream as it is.
 */
export function driftChunks(site, mode, chunks, { answer, contentType }) {
  if (mode === 'json') {
    const body = JSON.stringify({ code: 0, msg: 'success', data: { message_id: 2, answer, finished: true } });
    return { chunks: [Buffer.from(body, 'utf8')], contentType: 'application/json; charset=utf-8' };
  }
  if (mode !== 'field') return { chunks, contentType };
  const renames = FIELD_RENAMES[site];
  if (!renames) throw new Error(`${site} has no text field to rename`);
  const bufs = chunks.map(toBuffer);
  // latin1 keeps every byte as one character, so ASCII renames never disturb UTF-8 or binary frames.
  let text = Buffer.concat(bufs).toString('latin1');
  for (const [from, to] of renames) {
    if (from.length !== to.length) throw new Error(`rename ${from} → ${to} must keep the length`);
    text = text.split(from).join(to);
  }
  const all = Buffer.from(text, 'latin1');
  const out = [];
  let at = 0;
  for (const b of bufs) { out.push(all.subarray(at, at + b.length)); at += b.length; }
  return { chunks: out, contentType };
}

/** The request path with the moved prefix taken off (the server answers both). */
export function unmovedPath(pathWithQuery) {
  return pathWithQuery.startsWith(`${MOVED_PREFIX}/`) ? pathWithQuery.slice(MOVED_PREFIX.length) : pathWithQuery;
}
