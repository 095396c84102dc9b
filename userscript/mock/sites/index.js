// All mock chat sites, for the mock HTTP server and the adapter tests.
//
// Each default export: { name, hosts, page({nonce}), csp, endpoint: {method, path (string|RegExp)}, variants,
//   variantMeta: {[variant]: {contentType, hosts, path?}}  (which hosts/endpoint/content type a variant belongs
//     to, for sites with several front ends: Qianwen CN vs chat.qwen.ai, Kimi legacy vs Connect),
//   reasoningVariants: variants that carry reasoning text,
//   errorVariants: {[variant]: expected error code} (streams that end in a site error frame),
//   stream({answer, reasoning, variant, seed}) → Uint8Array[] with hostile chunking, contentType }.
// `csp`: the site's Content-Security-Policy (directive → sources, lib/csp.js NONCE for the per-response nonce),
//   sent on the HTML page; page({nonce}) puts the same nonce on the page's inline <script>/<style>.
// Pages send their request to their own origin (relative URL), so one mock server per host suffices.

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

export const sites = [deepseek, doubao, yuanbao, qianwen, chatgpt, claude, gemini, kimi, chatglm, yiyan, xinghuo];
export default sites;
