// What the chat sites take as attachments, shared by the adapters' `upload` tables (src/core/attach.js reads
// them; docs/sites/<site>.md has each site's facts and sources). Patterns are `accept` attribute values: an
// exact MIME type, `type/*`, or a `.ext` extension.

export const MB = 1024 * 1024;

/** Images every site's composer takes. */
export const IMAGES = Object.freeze(['image/png', 'image/jpeg', 'image/webp', 'image/gif']);

/** Documents the sites' composers take (PDF, Office, text). */
export const DOCS = Object.freeze(['application/pdf', '.pdf', '.txt', '.md', '.doc', '.docx', '.xls', '.xlsx', '.ppt', '.pptx', '.csv', '.json']);

/**
 * One site's table: `how` ('input' | 'drop' | 'paste', or a list tried in order), `accept`, `maxBytes`,
 * `maxFiles`, and the selectors of the file `input`, the drop/paste `target`, a file's `chip`, an upload in
 * progress (`busy`) and an upload `error`. Each selector list ends with the generic ones.
 */
export function uploadTable({ how = 'input', accept, maxBytes, maxFiles, input = [], target = [], chip, busy, error }) {
  return Object.freeze({
    how,
    accept: Object.freeze([...accept]),
    maxBytes,
    maxFiles,
    input: Object.freeze([...input, 'input[type="file"]']),
    target: Object.freeze([...target]),
    chip: Object.freeze([...chip]),
    busy: Object.freeze([...busy, '[role="progressbar"]']),
    error: Object.freeze([...error]),
  });
}
