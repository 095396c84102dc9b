// The skills page (#/skills): every skill with its kind, whether it may run, its hash and its
// last error; a program skill's source to edit, save and enable. Saving and enabling are a
// person's acts: they go with the session cookie and its CSRF token (the hub refuses the bearer
// token for them), and a model's reply has no command for them (docs/memory-and-skills.md).
import { h, replace } from './dom.js';
import { getLang } from './i18n.js';
import { api } from './api.js';

const STR = {
  en: {
    skills: 'Skills', name: 'Name', kind: 'Kind', enabled: 'May run', hash: 'SHA-256', error: 'Last error',
    yes: 'yes', waits: 'waits to be enabled', broken: 'not loaded', edit: 'Edit', new_skill: 'New program skill',
    ext: 'Language', create: 'Create', save: 'Save', enable: 'Enable', saved: 'Saved. A new or changed program waits until you enable it.',
    enabled_now: 'Enabled: these bytes may run now.', empty: 'No skills. Put NAME.yaml, NAME.py, NAME.js or NAME.sh in the skills directory.',
    enable_note: 'Enable pins the hash shown: read the source first. Any change disables it again.',
    dir: 'Directory',
  },
  zh: {
    skills: '技能', name: '名称', kind: '类型', enabled: '可运行', hash: 'SHA-256', error: '最近错误',
    yes: '是', waits: '待启用', broken: '未加载', edit: '编辑', new_skill: '新建程序技能',
    ext: '语言', create: '创建', save: '保存', enable: '启用', saved: '已保存。新的或改过的程序需要你启用后才能运行。',
    enabled_now: '已启用：这份内容现在可以运行。', empty: '没有技能。把 NAME.yaml、NAME.py、NAME.js 或 NAME.sh 放进技能目录。',
    enable_note: '启用会固定下面显示的哈希：请先读一遍源码。任何修改都会让它重新等待启用。',
    dir: '目录',
  },
};

function st(key) {
  return (STR[getLang()] || STR.en)[key] || STR.en[key] || key;
}

const PROGRAM = new Set(['python', 'node', 'sh']);

/** Save and enable: the session's CSRF token on every write; JSON answers, errors as text. */
async function write(method, path, body) {
  const { csrf } = await api.session();
  const r = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf || '' },
    body: JSON.stringify(body),
  });
  const raw = await r.text();
  let data = {};
  try { data = raw ? JSON.parse(raw) : {}; } catch { data = { error: raw }; }
  if (!r.ok) throw new Error(data.error || `${r.status}`);
  return data;
}

async function read(path) {
  const r = await fetch(path, { credentials: 'same-origin' });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.error || `${r.status}`);
  return data;
}

function stateText(s) {
  if (s.kind === 'broken') return st('broken');
  return s.enabled ? st('yes') : st('waits');
}

/** The page; `select` opens that skill's editor. */
export async function skillsPage() {
  const box = h('section', { class: 'skills-page' }, h('h2', { text: st('skills') }));
  const listBox = h('div');
  const editor = h('div', { class: 'skill-editor' });
  const msg = h('p', { class: 'msg', role: 'status', id: 'skill-msg' });
  box.append(listBox, msg, editor);

  const say = (text, bad = false) => { msg.textContent = text; msg.classList.toggle('error', bad); };

  const load = async () => {
    const { skills, dir } = await read('/api/skills');
    replace(listBox,
      h('p', { class: 'meta', text: `${st('dir')}: ${dir}` }),
      skills.length
        ? h('table', { class: 'grid', id: 'skills' },
          h('thead', {}, h('tr', {}, ['name', 'kind', 'enabled', 'hash', 'error', 'edit'].map((k) => h('th', { text: st(k) })))),
          h('tbody', {}, skills.map((s) => h('tr', { 'data-skill': s.name, 'data-kind': s.kind, 'data-enabled': String(s.enabled) },
            h('td', { text: s.name }),
            h('td', { text: s.kind }),
            h('td', { class: 'state', text: stateText(s) }),
            h('td', {}, s.sha256 ? h('code', { title: s.sha256, text: s.sha256.slice(0, 12) }) : '—'),
            h('td', { class: 'why', text: s.error || '' }),
            h('td', {}, PROGRAM.has(s.kind) || (s.kind === 'broken' && /\.(py|js|sh)$/.test(s.file))
              ? h('button', { 'data-edit': s.name, onclick: () => open(s.name), text: st('edit') })
              : null)))))
        : h('p', { class: 'empty', text: st('empty') }),
      newForm());
  };

  const newForm = () => {
    const name = h('input', { id: 'new-skill-name', placeholder: 'my-skill', pattern: '[a-z0-9_\\-]+' });
    const ext = h('select', { id: 'new-skill-ext' }, ['py', 'js', 'sh'].map((e) => h('option', { value: e, text: `.${e}` })));
    return h('form', { class: 'new-skill', onsubmit: (ev) => { ev.preventDefault(); create(name.value.trim(), ext.value); } },
      h('h3', { text: st('new_skill') }), name, ' ', ext, ' ', h('button', { type: 'submit', text: st('create') }));
  };

  const template = (name, ext) => {
    const c = ext === 'js' ? '//' : '#';
    const body = ext === 'py' ? 'import json, sys\nargs = json.load(sys.stdin)\nprint(args["text"])\n'
      : ext === 'js' ? 'let input = "";\nprocess.stdin.on("data", (d) => { input += d; });\nprocess.stdin.on("end", () => { console.log(JSON.parse(input).text); });\n'
        : 'cat\n';
    return `${c} name: ${name}\n${c} description: what it does\n${c} param text: string, required — the text\n${c} returns: text\n${body}`;
  };

  const create = (name, ext) => {
    if (!/^[a-z0-9_-]+$/.test(name)) { say('a-z, 0-9, _ -', true); return; }
    showEditor({ name, ext, source: template(name, ext), info: null, isNew: true });
  };

  const open = async (name) => {
    try { showEditor(await read(`/api/skills/${encodeURIComponent(name)}`)); } catch (e) { say(e.message, true); }
  };

  const showEditor = ({ name, ext, source, info, isNew = false }) => {
    const text = h('textarea', { id: 'skill-source', rows: 18, cols: 90, spellcheck: 'false' });
    text.value = source;
    const sha = info && info.sha256;
    const enableButton = h('button', {
      id: 'skill-enable', disabled: !sha || (info && info.enabled),
      onclick: async () => {
        try { await write('POST', `/api/skills/${encodeURIComponent(name)}/enable`, { sha256: sha }); say(st('enabled_now')); await load(); await open(name); } catch (e) { say(e.message, true); }
      },
      text: st('enable'),
    });
    const save = h('button', {
      id: 'skill-save',
      onclick: async () => {
        try {
          const r = await write('PUT', `/api/skills/${encodeURIComponent(name)}`, isNew ? { source: text.value, ext } : { source: text.value });
          say(r.info && r.info.kind === 'broken' ? r.info.error : st('saved'), Boolean(r.info && r.info.kind === 'broken'));
          await load();
          await open(name);
        } catch (e) { say(e.message, true); }
      },
      text: st('save'),
    });
    replace(editor,
      h('h3', {}, `${name}.${ext} `, info ? h('span', { class: 'state', 'data-enabled': String(Boolean(info.enabled)), text: stateText(info) }) : null),
      sha ? h('p', { class: 'meta' }, `${st('hash')}: `, h('code', { id: 'skill-sha', text: sha })) : null,
      info && info.error ? h('p', { class: 'error', text: info.error }) : null,
      text,
      h('p', {}, save, ' ', enableButton),
      h('p', { class: 'note', text: st('enable_note') }));
  };

  await load();
  return { el: box };
}
