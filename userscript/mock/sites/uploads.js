// Each mock site's upload, as docs/sites/<site>.md has the real one: the composer's file input and its
// accept list (or drop/paste), the chip, spinner and error markup the adapter's `upload` table looks for, the
// limits and the words the site refuses a file with, the page's own upload requests (`send`) and the routes
// that answer them (`api`). Where a fact is assumed rather than sourced, docs/sites says so; the markup
// names here are the adapter's selectors (src/adapters/<site>.js `upload`) so the two stay one model.

import { DOCS, IMAGES, MB } from './lib/upload.js';

const list = (...xs) => xs.flat().join(',');

/** The page-side helper every `send` starts with: JSON of a response, rejecting with the site's message. */
const CHECK = `function check(r) {
      return r.text().then(function (t) {
        var j = null; try { j = JSON.parse(t); } catch (e) { j = null; }
        var code = j && (j.code !== undefined ? j.code : j.error_code);
        var biz = j && j.data && j.data.biz_code;
        if (!r.ok || (code !== undefined && code !== 0 && code !== '0') || (biz !== undefined && biz !== null && biz !== 0)) {
          throw new Error((j && (j.msg || j.message || (j.error && (j.error.message || j.error)) || (j.data && j.data.biz_msg))) || ('HTTP ' + r.status));
        }
        return j;
      });
    }`;

/** A route that takes the multipart field `field` and answers `reply(id, file)`, or the queued refusal. */
function multipartTake(method, path, field, reply, refusal = (o) => ({ status: o.status || 400, json: { code: o.code ?? 1, msg: o.message } })) {
  return {
    method, path,
    handle(ctx) {
      const file = ctx.multipart().files.find((f) => f.field === field);
      if (!file) return { status: 400, json: { code: 1, msg: 'no file' } };
      const id = ctx.id();
      const refused = ctx.take({ id, name: file.filename, type: file.type, bytes: file.data });
      return refused ? refusal(refused) : { json: reply(id, file) };
    },
  };
}

/** A route that takes the raw body of a PUT (a presigned URL), id from the path's last segment. */
function putTake(path) {
  return {
    method: 'PUT', path,
    handle(ctx) {
      const id = ctx.path.split('/').pop();
      const meta = ctx.kept(id) || {};
      const refused = ctx.take({ id, name: meta.name || id, type: ctx.headers['content-type'] || '', bytes: ctx.body });
      return refused ? { status: refused.status || 403, json: { message: refused.message } } : { json: {} };
    },
  };
}

export const deepseek = {
  how: 'input',
  input: { 'class': 'ds-upload-input' },
  accept: list(IMAGES, DOCS),
  maxBytes: 100 * MB,
  maxFiles: 50,
  chipClass: 'ds-file-card',
  busyClass: 'ds-file-card__loading',
  errorClass: 'ds-file-card ds-file-card--error',
  messages: { type: '不支持的文件格式', size: '文件大小超过 100MB', count: '最多上传 50 个文件' },
  // POST /api/v0/file/upload_file (multipart `file`) → {data: {biz_data: {id, status: PENDING}}}; then the page
  // polls GET /api/v0/file/fetch_files?file_ids=ID until SUCCESS (docs/sites/deepseek.md).
  send: `function (file) {
    ${CHECK}
    var form = new FormData(); form.append('file', file);
    return fetch('/api/v0/file/upload_file', { method: 'POST', body: form, credentials: 'include' }).then(check).then(function (j) {
      var id = j.data.biz_data.id;
      function poll() {
        return fetch('/api/v0/file/fetch_files?file_ids=' + encodeURIComponent(id), { credentials: 'include' }).then(check).then(function (k) {
          var f = k.data.biz_data.files[0];
          if (f.status === 'SUCCESS') return { id: id };
          if (f.status === 'FAILED') throw new Error(f.error_code || '文件解析失败');
          return new Promise(function (r) { setTimeout(r, 150); }).then(poll);
        });
      }
      return poll();
    });
  }`,
  api: [
    multipartTake('POST', /^\/api\/v0\/file\/upload_file$/, 'file', (id, f) => ({ code: 0, msg: '', data: { biz_code: 0, biz_msg: '', biz_data: { id, status: 'PENDING', file_name: f.filename, file_size: f.data.length } } }),
      (o) => ({ status: 200, json: { code: 0, msg: '', data: { biz_code: o.code ?? 1, biz_msg: o.message, biz_data: null } } })),
    {
      method: 'GET', path: /^\/api\/v0\/file\/fetch_files$/,
      handle(ctx) {
        const id = ctx.query.get('file_ids');
        const polls = (ctx.kept(`polls:${id}`) || 0) + 1;
        ctx.keep(`polls:${id}`, polls);
        return { json: { code: 0, msg: '', data: { biz_code: 0, biz_msg: '', biz_data: { files: [{ id, status: polls < 2 ? 'PARSING' : 'SUCCESS' }] } } } };
      },
    },
  ],
};

export const doubao = {
  how: 'input',
  input: { 'data-testid': 'upload_file_input' },
  accept: list(IMAGES, DOCS),
  maxBytes: 50 * MB,
  maxFiles: 50,
  chipClass: 'file-card-wrapper',
  busyClass: 'file-card-loading',
  errorClass: 'file-card-wrapper file-card-error',
  messages: { type: '暂不支持该文件类型', size: '文件大小不能超过 50MB', count: '最多上传 50 个文件' },
  send: `function (file) {
    ${CHECK}
    var form = new FormData(); form.append('file', file);
    return fetch('/samantha/file/upload', { method: 'POST', body: form, credentials: 'include' }).then(check).then(function (j) { return { id: j.data.file_id }; });
  }`,
  api: [multipartTake('POST', /^\/samantha\/file\/upload$/, 'file', (id) => ({ code: 0, data: { file_id: id } }))],
};

export const yuanbao = {
  how: 'input',
  input: { 'class': 'hyc-upload-input' },
  accept: list(IMAGES, DOCS),
  maxBytes: 100 * MB,
  maxFiles: 50,
  chipClass: 'hyc-file-item',
  busyClass: 'hyc-file-item__loading',
  errorClass: 'hyc-file-item hyc-file-item--fail',
  messages: { type: '暂不支持该格式文件', size: '单个文件大小不能超过100M', count: '最多支持上传50个文件' },
  // POST /api/resource/genUploadInfo {fileName} → COS location; then PUT the bytes there (docs/sites/yuanbao.md).
  send: `function (file) {
    ${CHECK}
    return fetch('/api/resource/genUploadInfo', { method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'include',
      body: JSON.stringify({ fileName: file.name, docFrom: 'localDoc', docOpenId: '' }) }).then(check).then(function (info) {
      return fetch('/mock-cos/' + info.resourceId, { method: 'PUT', headers: { 'Content-Type': file.type || 'application/octet-stream' }, body: file })
        .then(check).then(function () { return { id: info.resourceId }; });
    });
  }`,
  api: [
    { method: 'POST', path: /^\/api\/resource\/genUploadInfo$/, handle(ctx) { const id = ctx.id(); ctx.keep(id, { name: ctx.json().fileName }); return { json: { resourceId: id, location: `/mock-cos/${id}`, bucketName: 'hunyuan-mock', region: 'ap-guangzhou' } }; } },
    putTake(/^\/mock-cos\/[\w-]+$/),
  ],
};

export const qianwen = {
  how: 'input',
  input: { id: 'filesUpload' },
  accept: list(IMAGES, DOCS),
  maxBytes: 100 * MB,
  maxFiles: 10,
  list: { 'class': 'prompt-input-file-list' },
  chipClass: 'fileitem-file',
  busyClass: 'fileitem-loading',
  errorClass: 'fileitem-file fileitem-error',
  messages: { type: '不支持的文件类型', size: '文件大小超出限制', count: '最多上传10个文件' },
  // chat.qwen.ai: POST /api/v2/files/getstsToken → a signed OSS URL; then PUT the bytes there (docs/sites/qwen.md).
  send: `function (file) {
    ${CHECK}
    return fetch('/api/v2/files/getstsToken', { method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'include',
      body: JSON.stringify({ filename: file.name, filesize: file.size, filetype: (file.type || '').split('/')[0] || 'file' }) }).then(check).then(function (j) {
      return fetch(j.data.file_url, { method: 'PUT', headers: { 'Content-Type': file.type || 'application/octet-stream' }, body: file })
        .then(check).then(function () { return { id: j.data.file_id }; });
    });
  }`,
  api: [
    { method: 'POST', path: /^\/api\/v2\/files\/getstsToken$/, handle(ctx) { const id = ctx.id(); ctx.keep(id, { name: ctx.json().filename }); return { json: { success: true, data: { file_id: id, file_url: `/mock-oss/${id}`, file_path: `user/${id}` } } }; } },
    putTake(/^\/mock-oss\/[\w-]+$/),
  ],
};

export const chatgpt = {
  how: 'input',
  input: { 'class': 'hidden', id: 'upload-files' },
  accept: '',
  maxBytes: 512 * MB,
  maxFiles: 10,
  chipClass: 'composer-attachment',
  busyClass: 'composer-attachment-loading',
  errorClass: 'composer-attachment composer-attachment-error',
  messages: { type: 'Unsupported file type', size: 'File is larger than 512 MB', count: 'You can attach up to 10 files' },
  // POST /backend-api/files → {file_id, upload_url}; PUT the bytes; POST /backend-api/files/ID/uploaded (assumed).
  send: `function (file) {
    ${CHECK}
    return fetch('/backend-api/files', { method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'include',
      body: JSON.stringify({ file_name: file.name, file_size: file.size, use_case: /^image\\//.test(file.type) ? 'multimodal' : 'my_files' }) }).then(check).then(function (j) {
      return fetch(j.upload_url, { method: 'PUT', headers: { 'Content-Type': file.type || 'application/octet-stream', 'x-ms-blob-type': 'BlockBlob' }, body: file }).then(check)
        .then(function () { return fetch('/backend-api/files/' + j.file_id + '/uploaded', { method: 'POST', credentials: 'include', headers: { 'Content-Type': 'application/json' }, body: '{}' }).then(check); })
        .then(function () { return { id: j.file_id }; });
    });
  }`,
  api: [
    { method: 'POST', path: /^\/backend-api\/files$/, handle(ctx) { const id = ctx.id(); ctx.keep(id, { name: ctx.json().file_name }); return { json: { status: 'success', file_id: id, upload_url: `/mock-blob/${id}` } }; } },
    putTake(/^\/mock-blob\/[\w-]+$/),
    { method: 'POST', path: /^\/backend-api\/files\/[\w-]+\/uploaded$/, handle() { return { json: { status: 'success' } }; } },
  ],
};

export const claude = {
  how: 'input',
  input: { 'data-testid': 'file-upload' },
  accept: list(IMAGES, DOCS),
  maxBytes: 30 * MB,
  maxFiles: 20,
  chipClass: 'attachment-thumbnail',
  busyClass: 'attachment-uploading',
  errorClass: 'attachment-thumbnail attachment-error',
  messages: { type: 'Files of this type are not supported', size: 'File is larger than 30 MB', count: 'You may not upload more than 20 files' },
  // POST /api/ORG/upload (multipart `file`) → {file_uuid} (docs/sites/claude.md).
  send: `function (file) {
    ${CHECK}
    var form = new FormData(); form.append('file', file);
    return fetch('/api/0b5c6f2e-mock-org/upload', { method: 'POST', body: form, credentials: 'include' }).then(check).then(function (j) { return { id: j.file_uuid }; });
  }`,
  api: [multipartTake('POST', /^\/api\/[\w-]+\/upload$/, 'file', (id, f) => ({ file_uuid: id, file_name: f.filename, size_bytes: f.data.length, file_kind: /^image\//.test(f.type) ? 'image' : 'document' }),
    (o) => ({ status: o.status || 400, json: { type: 'error', error: { type: 'invalid_request_error', message: o.message } } }))],
};

export const gemini = {
  // No file input in the page until the person opens the upload menu: files come in by drop (or paste)
  // on the input area (docs/sites/gemini.md).
  how: ['drop', 'paste'],
  dropZone: 'div[xapfileselectordropzone]',
  accept: list(IMAGES, DOCS),
  maxBytes: 100 * MB,
  maxFiles: 10,
  chipClass: 'file-preview-chip xap-filed-upload-preview',
  busyClass: 'file-preview-chip-loading',
  errorClass: 'file-preview-chip xap-filed-upload-preview file-upload-error',
  messages: { type: 'File type not supported', size: 'File is larger than 100 MB', count: 'You can upload up to 10 files' },
  // A resumable upload to Google's content-push service (docs/sites/gemini.md; same origin in the mock).
  send: `function (file) {
    ${CHECK}
    return fetch('/upload/', { method: 'POST', credentials: 'include', headers: { 'X-Goog-Upload-Protocol': 'resumable', 'X-Goog-Upload-Command': 'start', 'X-Goog-Upload-Header-Content-Length': String(file.size), 'X-Tenant-Id': 'bard-storage', 'Content-Type': 'application/x-www-form-urlencoded;charset=utf-8' }, body: 'File name: ' + encodeURIComponent(file.name) })
      .then(check).then(function (j) {
        return fetch(j.upload_url, { method: 'PUT', headers: { 'X-Goog-Upload-Command': 'upload, finalize', 'X-Goog-Upload-Offset': '0' }, body: file })
          .then(check).then(function () { return { id: '/contrib_service/ttl_1d/' + j.id }; });
      });
  }`,
  api: [
    { method: 'POST', path: /^\/upload\/$/, handle(ctx) { const id = ctx.id(); ctx.keep(id, { name: decodeURIComponent(ctx.body.toString().replace(/^File name: /, '')) }); return { json: { id, upload_url: `/upload/mock-session/${id}` } }; } },
    putTake(/^\/upload\/mock-session\/[\w-]+$/),
  ],
};

export const kimi = {
  how: 'input',
  input: { 'class': 'hidden-input' },
  accept: list(IMAGES, DOCS),
  maxBytes: 100 * MB,
  maxFiles: 50,
  chipClass: 'attachment-item',
  busyClass: 'attachment-item-loading',
  errorClass: 'attachment-item attachment-item-error',
  messages: { type: '不支持的文件格式', size: '文件大小不能超过 100MB', count: '最多上传 50 个文件' },
  // POST /api/pre-sign-url {action, name} → {url, object_name}; PUT; POST /api/file → {id} (docs/sites/kimi.md).
  send: `function (file) {
    ${CHECK}
    var action = /^image\\//.test(file.type) ? 'image' : 'file';
    return fetch('/api/pre-sign-url', { method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'include', body: JSON.stringify({ action: action, name: file.name }) })
      .then(check).then(function (s) {
        return fetch(s.url, { method: 'PUT', body: file }).then(check).then(function () {
          return fetch('/api/file', { method: 'POST', headers: { 'Content-Type': 'application/json' }, credentials: 'include', body: JSON.stringify({ type: action, name: file.name, object_name: s.object_name }) }).then(check);
        }).then(function (f) { return { id: f.id }; });
      });
  }`,
  api: [
    { method: 'POST', path: /^\/api\/pre-sign-url$/, handle(ctx) { const id = ctx.id(); ctx.keep(id, { name: ctx.json().name }); return { json: { url: `/mock-tos/${id}`, object_name: id } }; } },
    putTake(/^\/mock-tos\/[\w-]+$/),
    { method: 'POST', path: /^\/api\/file$/, handle(ctx) { return { json: { id: ctx.json().object_name, status: 'initialized' } }; } },
  ],
};

export const chatglm = {
  how: 'input',
  input: { 'class': 'upload-file-input' },
  accept: list(IMAGES, DOCS),
  maxBytes: 100 * MB,
  maxFiles: 10,
  chipClass: 'file-item',
  busyClass: 'file-item-loading',
  errorClass: 'file-item file-item-error',
  messages: { type: '不支持该文件格式', size: '文件大小超过限制', count: '最多上传10个文件' },
  // POST /chatglm/backend-api/assistant/file_upload (multipart `file`) → {result: {file_id, file_url}} (docs/sites/chatglm.md).
  send: `function (file) {
    ${CHECK}
    var form = new FormData(); form.append('file', file);
    return fetch('/chatglm/backend-api/assistant/file_upload', { method: 'POST', body: form, credentials: 'include' }).then(check).then(function (j) { return { id: j.result.file_id }; });
  }`,
  api: [multipartTake('POST', /^\/chatglm\/backend-api\/assistant\/file_upload$/, 'file', (id) => ({ code: 0, status: 0, message: 'success', result: { file_id: id, file_url: `https://sfile.chatglm.cn/mock/${id}` } }),
    (o) => ({ status: 200, json: { code: o.code ?? 10001, status: 1, message: o.message } }))],
};

export const yiyan = {
  how: 'input',
  input: { 'class': 'dialogue-upload-input' },
  accept: list(IMAGES, DOCS),
  maxBytes: 50 * MB,
  maxFiles: 10,
  chipClass: 'upload-file-item',
  busyClass: 'upload-file-item-loading',
  errorClass: 'upload-file-item upload-file-item-error',
  messages: { type: '不支持的文件类型', size: '文件大小超出限制', count: '最多上传10个文件' },
  send: `function (file) {
    ${CHECK}
    var form = new FormData(); form.append('file', file);
    return fetch('/eb/chat/file/upload', { method: 'POST', body: form, credentials: 'include' }).then(check).then(function (j) { return { id: j.data.fileId }; });
  }`,
  api: [multipartTake('POST', /^\/eb\/chat\/file\/upload$/, 'file', (id) => ({ code: 0, msg: 'success', data: { fileId: id } }))],
};

export const xinghuo = {
  how: 'input',
  input: { 'class': 'upload-input' },
  accept: list(IMAGES, DOCS),
  maxBytes: 20 * MB,
  maxFiles: 10,
  chipClass: 'file-card',
  busyClass: 'file-card-uploading',
  errorClass: 'file-card file-card-failed',
  messages: { type: '文件格式不支持', size: '文件大小不能超过20M', count: '最多上传10个文件' },
  send: `function (file) {
    ${CHECK}
    var form = new FormData(); form.append('file', file);
    return fetch('/iflygpt/oss/sign/upload', { method: 'POST', body: form, credentials: 'include' }).then(check).then(function (j) { return { id: j.data.fileId }; });
  }`,
  api: [multipartTake('POST', /^\/iflygpt\/oss\/sign\/upload$/, 'file', (id) => ({ code: 0, flag: true, desc: '成功', data: { fileId: id } }),
    (o) => ({ status: 200, json: { code: o.code ?? 1, flag: false, desc: o.message, message: o.message } }))],
};
