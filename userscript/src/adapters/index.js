// All site adapters, and the lookup the userscript core uses to pick one for the page it runs on.

import chatgpt from './chatgpt.js';
import chatglm from './chatglm.js';
import claude from './claude.js';
import deepseek from './deepseek.js';
import doubao from './doubao.js';
import gemini from './gemini.js';
import kimi from './kimi.js';
import qianwen from './qianwen.js';
import xinghuo from './xinghuo.js';
import yiyan from './yiyan.js';
import yuanbao from './yuanbao.js';

/** Every adapter, in the order the sites are listed in the spec. */
export const adapters = [deepseek, doubao, yuanbao, qianwen, chatgpt, claude, gemini, kimi, chatglm, yiyan, xinghuo];

/** The adapter that runs on `hostname` (exact host, or a subdomain of one), or null. */
export function adapterForHost(hostname) {
  const host = String(hostname || '').toLowerCase().replace(/\.$/, '');
  for (const adapter of adapters) {
    if (adapter.hosts.some((h) => host === h || host.endsWith(`.${h}`))) return adapter;
  }
  return null;
}
