// Two languages; the choice is kept in localStorage.
const DICT = {
  en: {
    title: 'AIcard dashboard', tabs: 'Tabs', runs: 'Runs', flows: 'Flows', lang: '中文',
    login_needed: 'Not logged in. Run `aicard open` (or use the login URL `aicard serve` printed) to open the dashboard.',
    site: 'Site', label: 'Label', role: 'Role', group: 'Group', node: 'Node', state: 'State', health: 'Health', queue: 'Queue', actions: 'Change',
    quotas: 'Quotas per site', quota_card: 'role card', quota_command: 'tabs budget', quota_next: 'next send in',
    save: 'Save', no_tabs: 'No tabs are connected. Install the userscript in your chat tabs.',
    run: 'Run', flow: 'Flow', started: 'Started', updated: 'Updated', no_runs: 'No runs yet. Start one from Flows.',
    pause: 'Pause', resume: 'Resume', stop: 'Stop', legend: 'Legend', timeline: 'Timeline', events: 'Latest journal events',
    node_panel: 'Node', prompt: 'Rendered prompt', template: 'Template', chosen_tab: 'Chosen tab', why: 'Why', attempts: 'Attempts',
    attempt: '#', outcome: 'Outcome', queue_ms: 'Queue', first_chunk: 'First chunk', total: 'Total', output: 'Output', error: 'Error',
    open_tab: 'Open the tab', items: 'Items', more: 'More', close: 'Close', unknown: '—', no_chunk: 'no chunk streamed (answered in one piece, failed, a command, or an older run)',
    editor: 'Flow editor', valid: 'Valid', invalid: 'Problems', inputs: 'Inputs', run_flow: 'Run this flow', fix_first: 'Fix the problems first: nothing to draw or run', new_flow: 'New flow',
    load: 'Load', preview: 'Drawing', output_run: 'Run output', live: 'live', expand: 'click to expand', collapse: 'collapse',
    pending: 'pending', running: 'running', paused: 'paused', completed: 'completed', failed: 'failed', skipped: 'skipped',
    cancelled: 'cancelled', retrying: 'retrying', idle: 'idle', busy: 'busy', offline: 'offline', ok: 'ok', silent: 'silent', lost: 'lost',
    stopped: 'stopped', interrupted: 'interrupted', new: 'new', of: 'of', journal_len: 'journal events',
    plans: 'Plan drafts', plan_one: 'Plan draft', no_plans: 'No plan drafts. Ask for one in a master tab: ?<manager plan GOAL>!',
    goal: 'Goal', planner: 'Planner', created: 'Created', decided: 'Decided', nodes: 'Nodes', parent: 'Modifies',
    draft: 'draft', approved: 'approved', modified: 'modified', rejected: 'rejected',
    approve: 'Approve and run', reject: 'Reject', edit_yaml: 'Edit the YAML', save_draft: 'Save as a new draft',
    cancel: 'Cancel', feedback: 'Ask the planner for changes', send_feedback: 'Re-plan with this feedback',
    plan_yaml: 'Flow YAML', plan_text: 'Summary', approval_note: 'Nothing is sent to any tab before approval.',
    cooling: 'cooling', parked: 'parked', engine: 'Engine', success: 'Success', ttft: 'First chunk',
    s_per_1k: 's / 1k chars', in_flight: 'In flight', answers: 'Answers network/page/empty', score_table: 'Decision engine scores', left: 'left',
    tab_legend: 'Tab states', all_plans: 'All drafts',
    skills: 'Skills',
    agents: 'Agents', agent: 'Agent', sessions: 'Sessions', session: 'Session', target: 'Target', tools: 'Tools', creator: 'Creator',
    tab: 'Tab', round: 'Round', running_cmd: 'Running', ended: 'ended', rounds: 'Rounds', command: 'Command', result: 'Result',
    no_agents: 'No agents yet. Create one in a tab: ?<agent create NAME on TAB>!',
    no_sessions: 'No agent sessions yet. Turn the loop on in a master tab (?<agent loop on>!) or give an agent a task.',
    no_rounds: 'No round closed yet.', all_sessions: 'All agents and sessions', looping_tab: '(looping tab)',
    output_cut: 'output cut', chars: 'characters',
    master: 'master', foreman: 'foreman', worker: 'worker', event_stream: 'event stream', reconnecting: 'reconnecting…',
    kind_flows: 'Flows', kind_calls: 'API & MCP', kind_all: 'All', runs_show: 'Show', no_runs_kind: 'No runs of this kind.',
    expected: 'Expected', score: 'Score', as_text: 'As text (?<manager why RUN NODE>!)',
  },
  zh: {
    title: 'AIcard 仪表盘', tabs: '标签页', runs: '运行', flows: '流程', lang: 'English',
    login_needed: '尚未登录。运行 `aicard open`（或打开 `aicard serve` 打印的登录链接）进入仪表盘。',
    site: '站点', label: '标签', role: '角色', group: '分组', node: '节点', state: '状态', health: '健康', queue: '队列', actions: '修改',
    quotas: '各站点配额', quota_card: '角色卡', quota_command: 'tabs budget 命令', quota_next: '下次可发送：',
    save: '保存', no_tabs: '没有已连接的标签页。请在聊天标签页中安装用户脚本。',
    run: '运行', flow: '流程', started: '开始', updated: '更新', no_runs: '还没有运行。到“流程”页开始一个。',
    pause: '暂停', resume: '继续', stop: '停止', legend: '图例', timeline: '时间线', events: '最近的日志事件',
    node_panel: '节点', prompt: '渲染后的提示词', template: '模板', chosen_tab: '选中的标签页', why: '原因', attempts: '尝试',
    attempt: '#', outcome: '结果', queue_ms: '排队', first_chunk: '首个片段', total: '总计', output: '输出', error: '错误',
    open_tab: '打开该标签页', items: '条目', more: '更多', close: '关闭', unknown: '—', no_chunk: '没有流式片段（一次性回答、失败、命令或较早的运行）',
    editor: '流程编辑器', valid: '有效', invalid: '问题', inputs: '输入', run_flow: '运行此流程', fix_first: '先修正问题：无法绘制或运行', new_flow: '新流程',
    load: '载入', preview: '图', output_run: '运行结果', live: '实时', expand: '点击展开', collapse: '收起',
    pending: '等待', running: '运行中', paused: '已暂停', completed: '已完成', failed: '失败', skipped: '已跳过',
    cancelled: '已取消', retrying: '重试中', idle: '空闲', busy: '忙碌', offline: '离线', ok: '正常', silent: '无响应', lost: '丢失',
    stopped: '已停止', interrupted: '已中断', new: '新建', of: '/', journal_len: '条日志事件',
    plans: '计划草案', plan_one: '计划草案', no_plans: '还没有计划草案。在主控标签页里发送：?<manager plan 目标>!',
    goal: '目标', planner: '规划者', created: '创建', decided: '处理', nodes: '节点数', parent: '修改自',
    draft: '草案', approved: '已批准', modified: '已修改', rejected: '已拒绝',
    approve: '批准并运行', reject: '拒绝', edit_yaml: '编辑 YAML', save_draft: '保存为新草案',
    cancel: '取消', feedback: '请规划者修改', send_feedback: '按此意见重新规划',
    plan_yaml: '流程 YAML', plan_text: '摘要', approval_note: '批准前不会向任何标签页发送任务。',
    cooling: '冷却中', parked: '已暂停', engine: '引擎', success: '成功率', ttft: '首个片段',
    s_per_1k: '秒 / 千字', in_flight: '在途', answers: '回复 网络/页面/空', score_table: '决策引擎得分', left: '剩余',
    tab_legend: '标签页状态', all_plans: '全部草案',
    skills: '技能',
    agents: '代理', agent: '代理', sessions: '会话', session: '会话', target: '目标', tools: '工具', creator: '创建者',
    tab: '标签页', round: '轮次', running_cmd: '正在运行', ended: '已结束', rounds: '各轮', command: '命令', result: '结果',
    no_agents: '还没有代理。在标签页中创建：?<agent create 名称 on 标签页>!',
    no_sessions: '还没有代理会话。在主控标签页中开启循环（?<agent loop on>!），或给代理一个任务。',
    no_rounds: '还没有完成的轮次。', all_sessions: '全部代理和会话', looping_tab: '（循环中的标签页）',
    output_cut: '输出已截断', chars: '个字符',
    master: '总指挥', foreman: '包工头', worker: '工人', event_stream: '事件流', reconnecting: '重新连接中…',
    kind_flows: '流程', kind_calls: 'API 与 MCP', kind_all: '全部', runs_show: '显示', no_runs_kind: '没有这一类的运行。',
    expected: '预计', score: '得分', as_text: '文本（?<manager why 运行 节点>!）',
  },
};

let lang = 'en';
try {
  lang = localStorage.getItem('aicard.lang') || ((navigator.language || '').startsWith('zh') ? 'zh' : 'en');
} catch { /* storage unavailable */ }

export function t(key) {
  return (DICT[lang] && DICT[lang][key]) || DICT.en[key] || key;
}

export function getLang() { return lang; }

export function toggleLang() {
  lang = lang === 'en' ? 'zh' : 'en';
  try { localStorage.setItem('aicard.lang', lang); } catch { /* private mode */ }
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
}
