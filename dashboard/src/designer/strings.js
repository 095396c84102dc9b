// The designer's words, 中文 and English (the page's language from ../i18n.js). The buttons'
// accessible names are bilingual in both languages: they are the contract tests and people's
// tools find them by.
import { getLang } from '../i18n.js';

export const BUTTONS = {
  add: '添加节点 Add node', connect: '连接 Connect', delete: '删除 Delete', save: '保存 Save',
  undo: '撤销 Undo', redo: '重做 Redo', run: '运行 Run',
};

const DICT = {
  en: {
    designer: 'Flow designer', graph: 'Graph', yaml: 'YAML', kind: 'Node kind', new_id: 'New node id (optional)',
    file: 'File name (flows/NAME.yaml)', open: 'Open', tpl_sample: 'New: two reviews and a merge (template)', tpl_blank: 'New: empty',
    problems: 'Problems', selected_none: 'Select a node (click it, or Tab to it and press Enter) to edit its fields.',
    f_id: 'id', f_name: 'name', f_to: 'target (to), comma-separated', f_prompt: 'prompt', f_needs: 'needs (comma-separated ids)',
    f_retry: 'retry (YAML, e.g. {max: 2})', f_timeout: 'timeout (e.g. 2m or {attempt: 5m})', f_on_failure: 'on_failure', f_files: 'files (comma-separated)',
    variables: 'Variables', connect_pick: 'Connect: choose the node that needs', connect_hint: '(click it, or focus it and press Enter; Esc cancels)',
    connected: 'connected', deleted: 'deleted', from_dependents: 'also removed from the needs of', saved: 'Saved', not_saved: 'Not saved',
    conflict: 'The file changed on disk since it was opened. Both versions:', mine: 'Mine (this page)', disk: 'On disk now',
    keep_mine: 'Save mine over it', take_disk: 'Take the disk\'s version', unsaved: 'unsaved changes', yaml_error: 'YAML does not parse',
    seed: 'This file is in the manual\'s seed form: shown read-only. Import it as native YAML first:',
    plan_from: 'Plan draft — opened for approval', approve: '批准并运行 Approve and run', keys: 'Keys: Tab to a node, Enter selects, arrows move it, Delete deletes, C connects, Ctrl+Z / Ctrl+Shift+Z undo and redo.',
    added: 'added', nothing_selected: 'select a node first', edited: 'edited', open_designer: 'Open in the designer',
  },
  zh: {
    designer: '流程设计器', graph: '图', yaml: 'YAML', kind: '节点类型', new_id: '新节点 id（可不填）',
    file: '文件名（flows/名称.yaml）', open: '打开', tpl_sample: '新建：两份评审加合并（模板）', tpl_blank: '新建：空白',
    problems: '问题', selected_none: '选中一个节点（点击，或用 Tab 移到它上面按回车）即可编辑它的字段。',
    f_id: 'id', f_name: '名称 name', f_to: '目标 to（逗号分隔）', f_prompt: '提示词 prompt', f_needs: '依赖 needs（逗号分隔的 id）',
    f_retry: '重试 retry（YAML，如 {max: 2}）', f_timeout: '超时 timeout（如 2m 或 {attempt: 5m}）', f_on_failure: '失败时 on_failure', f_files: '文件 files（逗号分隔）',
    variables: '变量', connect_pick: '连接：选择依赖它的节点', connect_hint: '（点击，或聚焦后按回车；Esc 取消）',
    connected: '已连接', deleted: '已删除', from_dependents: '同时从这些节点的依赖中移除', saved: '已保存', not_saved: '未保存',
    conflict: '文件在打开后已在磁盘上被修改。两个版本：', mine: '我的（本页）', disk: '磁盘上的当前版本',
    keep_mine: '用我的覆盖', take_disk: '采用磁盘上的版本', unsaved: '有未保存的修改', yaml_error: 'YAML 无法解析',
    seed: '这是手册里的种子格式文件，只读显示。请先导入为原生 YAML：',
    plan_from: '计划草案——在此审批', approve: '批准并运行 Approve and run', keys: '键盘：Tab 移到节点，回车选中，方向键移动，Delete 删除，C 连接，Ctrl+Z / Ctrl+Shift+Z 撤销和重做。',
    added: '已添加', nothing_selected: '请先选中一个节点', edited: '已修改', open_designer: '在设计器中打开',
  },
};

export function dt(key) {
  const lang = getLang();
  return (DICT[lang] && DICT[lang][key]) || DICT.en[key] || key;
}
