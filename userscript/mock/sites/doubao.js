// Mock www.doubao.com: a React-style textarea composer and `/chat/completion` answered with Doubao's SSE
// (reference §2a: the 2025-11 capture shape, the CHUNK_DELTA variant, the tts-only claim, deep-think blocks,
// STREAM_ERROR) and `/samantha/chat/completion` with the legacy double-encoded JSON (§2b).

import { strictCsp } from './lib/csp.js';
import { renderPage } from './lib/page.js';
import { doubao as upload } from './uploads.js';
import { hostileSse, prepare, sseEvent } from './lib/wire.js';

const currentVariants = ['default', 'chunk-delta', 'tts-only', 'deep-think', 'stream-error'];
const variants = [...currentVariants, 'samantha'];
const CONV = '30303300814870018';
const MSG = '30310952846767362';

function textBlock(text, extra = {}) {
  return { block_type: 10000, block_id: '30387402865563394', content: { text_block: { text } }, is_finish: false, patch_type: 1, ...extra };
}

function currentStream(rng, variant, tokens, thinkTokens, prompt, answer, args = {}) {
  let id = 0;
  const ev = (event, obj) => sseEvent({ id: id++, event, data: JSON.stringify(obj) });
  const events = [
    sseEvent({ id: 0, event: 'SSE_HEARTBEAT', data: '{}' }),
    sseEvent({ id: 0, event: 'SSE_ACK', data: JSON.stringify({
      query_list: [{ question_id: '30310952846766850', local_message_id: '7ef89f70-c741-11f0-bf4b-410b389a1f69', message_index: 26 }],
      ack_client_meta: { conversation_id: CONV, conversation_type: 3, section_id: '30303300814870274' },
      timeout_conf: { answer_first_pending_time: 180000, packet_interval_time: 120000 },
    }) }),
  ];
  id = 1;
  const userBlock = { block_type: 10000, block_id: '0b63341b-b837-4358-b2ee-7d2c41ae587f', content: { text_block: { text: prompt } } };
  events.push(ev('FULL_MSG_NOTIFY', {
    message: {
      conversation_id: CONV, message_id: '30310952846766850', message_body_version: 1, sender_id: '204977496917593', user_type: 1,
      content_type: 9999, content: JSON.stringify([userBlock]), index_in_conv: 26, create_time: 1763774456,
      content_block: [{ ...userBlock, is_finish: false }], tts_content: '', update_time: 1763774456,
      local_message_id: '7ef89f70-c741-11f0-bf4b-410b389a1f69', section_id: '30303300814870274', bot_reply_message_id: '0', fetch_token: '30310952846766850',
    },
    message_attr: { badge_count: 26, read_badge_count: 26 },
  }));
  if (variant === 'stream-error') {
    events.push(ev('STREAM_ERROR', { error_code: 710022004, error_msg: '请求过于频繁，请稍后再试' }));
    return hostileSse(events, rng);
  }
  const meta = { message_id: MSG, conversation_id: CONV, section_id: '30303300814870274', sender_id: '7338286299411103781', user_type: 2, create_time: 1763774457, index_in_conv: 27, bot_reply_message_id: '30310952846766850', local_conversation_id: '' };
  const notify = (blocks, tts) => ev('STREAM_MSG_NOTIFY', {
    content: { content_block: blocks, content_status: 100, ext: { agent_name: '豆包', model_type: '38' }, content_type: 9999, tts_content: tts },
    meta, attr: { reply_unique_key: '74098698-21ee-4d49-afc8-3847d0f2ad69' },
  });
  const chunk = (ops) => ev('STREAM_CHUNK', { message_id: MSG, patch_op: ops });
  const textOp = (t) => ({ patch_object: 1, patch_type: 1, patch_value: { content_block: [textBlock(t)] } });
  const ttsOp = (t) => ({ patch_object: 111, patch_type: 1, patch_value: { tts_content: t } });
  const [first = '', ...rest] = tokens;
  if (variant === 'deep-think') {
    const think = (t) => ({ block_type: 10040, block_id: '30387402865563390', content: { thinking_block: { text: t, finish_title: '' } }, is_finish: false, patch_type: 1 });
    const [r0 = '', ...rr] = thinkTokens;
    events.push(notify([think(r0)], ''));
    for (const t of rr) events.push(chunk([{ patch_object: 1, patch_type: 1, patch_value: { content_block: [think(t)] } }]));
    events.push(chunk([{ patch_object: 1, patch_type: 1, patch_value: { content_block: [{ ...think(''), is_finish: true, content: { thinking_block: { finish_title: '已完成思考' } } }] } }]));
    events.push(chunk([textOp(first), ttsOp(first)]));
  } else if (variant === 'tts-only') {
    const head = Array.from(first)[0] || '';
    events.push(notify([textBlock(head)], first));
  } else {
    events.push(notify([textBlock(first)], first));
  }
  rest.forEach((t, i) => {
    if (variant === 'tts-only') events.push(chunk([ttsOp(t)]));
    else if (variant === 'chunk-delta' && i % 3 === 1) events.push(ev('CHUNK_DELTA', { text: t }));
    else if (variant === 'chunk-delta' && i % 3 === 2) {
      events.push(chunk([textOp(t)]));
      events.push(chunk([ttsOp(t)]));
    } else events.push(chunk([textOp(t), ttsOp(t)]));
  });
  for (const [i, img] of (args.images || []).entries()) {
    // A creation block (block_type 2074, docs/sites/doubao.md "Images"): first while the image is made (no
    // address), then with the thumbnail and the original.
    const block = (image, finished) => ({ block_type: 2074, block_id: `creation-${i}`, parent_id: '', is_finish: finished,
      content: { creation_block: { creations: [{ type: 1, image }] } } });
    events.push(chunk([{ patch_object: 1, patch_type: 1, patch_value: { content_block: [block({ key: `img-${i}`, status: 1 }, false)] } }]));
    const thumb = { url: `${img.url.split('?')[0]}~tplv-a9rns2rl98-downsize_watermark_1_5_b.png?x-signature=thumb`, width: 512, height: 512, format: 'png' };
    events.push(chunk([{ patch_object: 1, patch_type: 1, patch_value: { content_block: [block({ key: `img-${i}`, status: 2, image_thumb: thumb,
      image_ori: { url: img.url, width: 1024, height: 1024, format: 'png' }, image_ori_raw: { url: img.url, width: 1024, height: 1024, format: 'png' }, description: img.alt || '' }, true)] } }]));
  }
  events.push(chunk([{ patch_object: 1, patch_type: 1, patch_value: { content_block: [{ ...textBlock(''), content: { text_block: {} }, is_finish: true }] } }]));
  events.push(chunk([{ patch_object: 3, patch_type: 2, patch_value: {} }, { patch_object: 50, patch_type: 1, patch_value: { ext: { is_finish: '1' } } }]));
  events.push(ev('SSE_REPLY_END', { end_type: 1, msg_finish_attr: { msgid: MSG, badge_count: 27, read_badge_count: 26, brief: answer } }));
  events.push(chunk([{ patch_object: 50, patch_type: 1, patch_value: { ext: { suggest: '你还想聊点什么？' } } }]));
  events.push(ev('SSE_REPLY_END', { end_type: 2, answer_finish_attr: { has_suggest: true } }));
  events.push(ev('SSE_REPLY_END', { end_type: 3 }));
  return hostileSse(events, rng);
}

function samanthaStream(rng, tokens, answer) {
  const ids = { message_id: '30264898682238466', local_message_id: 'c1e503c0-c69a-11f0-a880-c56c80360dcc', conversation_id: '30272893581535746', local_conversation_id: 'local_1381142239817711', section_id: '30272893581536002' };
  let eventId = 0;
  const ev = (type, ed) => sseEvent({ data: JSON.stringify({ event_data: JSON.stringify(ed), event_id: String(eventId++), event_type: type }) });
  const events = [ev(2002, { ...ids, message_id: '30264898682237954', message_index: 1, conversation_type: 5 })];
  const msg = (content, extra = {}) => ({
    message: { content_type: 2001, content: JSON.stringify(content), id: '7b9bd125-b4bf-4f56-a845-dc09aba11efa' },
    ...ids, reply_id: '30264898682237954', is_delta: true, status: 4, input_content_type: 2001, message_index: 2, bot_id: '7338286299411103781', ...extra,
  });
  events.push(ev(2010, { intention: 'chat', ...ids }));
  for (const t of tokens) events.push(ev(2001, msg({ text: t })));
  events.push(ev(2001, msg({}, { status: 1, is_finish: true, has_suggest: true, message_action_bar: {}, tts_content: answer })));
  events.push(ev(2001, { ...msg({}), message: { content_type: 2002, content: JSON.stringify({ suggest: 'How are you today?', suggestions: ['How are you today?'] }), id: '889d19e2' }, status: 1 }));
  events.push(sseEvent({ data: JSON.stringify({ event_data: '{}', event_id: String(eventId++), event_type: 2003 }) }));
  return hostileSse(events, rng);
}

function stream(args = {}) {
  const { rng, variant, tokens, thinkTokens, answer } = prepare(args, variants);
  const prompt = args.prompt || 'hello3';
  return variant === 'samantha' ? samanthaStream(rng, tokens, answer) : currentStream(rng, variant, tokens, thinkTokens, prompt, answer, args);
}

function page(opts) {
  return renderPage({
    title: '豆包 - 字节跳动旗下 AI 智能助手',
    body: `<div id="root"><div class="flow-chat-layout">
  <div class="message-list mock-messages" data-testid="message-list" id="message-list"></div>
  <div data-testid="chat_input" class="chat-input-container" style="position:fixed;left:0;right:0;bottom:16px;max-width:760px;margin:auto;border:1px solid #ddd;border-radius:16px;padding:12px">
    <textarea data-testid="chat_input_input" class="semi-input-textarea semi-input-textarea-autosize" placeholder="发消息或输入“/”选择技能" rows="1" style="width:100%;border:0;resize:none;font:inherit"></textarea>
    <div style="display:flex;justify-content:flex-end">
      <button id="flow-end-msg-send" data-testid="chat_input_send_button" aria-label="发送" class="semi-button semi-button-primary" type="button">↑</button>
    </div>
  </div>
</div></div>`,
    input: { selector: 'textarea[data-testid="chat_input_input"]', kind: 'react-textarea' },
    send: { selector: 'button[data-testid="chat_input_send_button"]' },
    messages: '#message-list',
    transport: 'fetch',
    request: `function (prompt, ctx) {
      var q = 'aid=497858&device_id=7468&device_platform=web&language=zh&pc_version=2.46.1&pkg_type=release_version&real_aid=497858&region=CN&samantha_web=1&sys_region=CN&use-olympus-account=1&version_code=20800&web_id=7468&msToken=mock&a_bogus=mock';
      if (location.search.indexOf('samantha') >= 0) {
        return { url: '/samantha/chat/completion?' + q, method: 'POST', headers: { 'Content-Type': 'application/json', 'Agw-Js-Conv': 'str' },
          body: JSON.stringify({ messages: [{ content: JSON.stringify({ text: prompt }), content_type: 2001, attachments: (ctx.files || []).map(function (f) { return { type: /^image\\//.test(f.type) ? 'image' : 'file', name: f.name, key: f.id }; }), references: [] }],
            completion_option: { is_regen: false, with_suggest: true, need_create_conversation: true, launch_stage: 1, is_replace: false, is_delete: false,
              message_from: 0, use_deep_think: false, use_auto_cot: false, resend_for_regen: false, enable_commerce_credit: false, event_id: '0' },
            evaluate_option: { web_ab_params: '' }, conversation_id: '0', local_conversation_id: 'local_' + ctx.now, local_message_id: ctx.uuid() }) };
      }
      return { url: '/chat/completion?' + q, method: 'POST', headers: { 'Content-Type': 'application/json', 'Agw-Js-Conv': 'str' },
        body: JSON.stringify({ client_meta: { conversation_id: '30303300814870018', bot_id: '7338286299411103781', last_section_id: '30303300814870274', last_message_index: 25 },
          messages: [{ local_message_id: ctx.uuid(), content_block: [{ block_type: 10000, content: { text_block: { text: prompt, icon_url: '', icon_url_dark: '' }, pc_event_block: '' },
            block_id: ctx.uuid(), parent_id: '', meta_info: [], append_fields: [] }].concat((ctx.files || []).map(function (f) { return { block_type: /^image\\//.test(f.type) ? 10052 : 10053, content: { file_block: { name: f.name, uri: f.id } }, block_id: ctx.uuid(), parent_id: '' }; })), message_status: 0 }],
          option: { send_message_scene: '', create_time_ms: ctx.now, collect_id: '', is_audio: false, answer_with_suggest: false, tts_switch: false, need_deep_think: 0,
            click_clear_context: false, from_suggest: false, is_regen: false, is_replace: false, disable_sse_cache: false, select_text_action: '', resend_for_regen: false,
            scene_type: 0, unique_key: ctx.uuid(), start_seq: 0, need_create_conversation: false, regen_query_id: [], edit_query_id: [], regen_instruction: '',
            no_replace_for_regen: false, message_from: 0, shared_app_name: '', sse_recv_event_options: { support_chunk_delta: true } },
          ext: { use_deep_think: '0', commerce_credit_config_enable: '0', sub_conv_firstmet_type: '0' } }) };
    }`,
    upload,
  }, opts);
}

const meta = {};
for (const v of currentVariants) meta[v] = { contentType: 'text/event-stream', hosts: ['www.doubao.com'], path: '/chat/completion' };
meta.samantha = { contentType: 'text/event-stream', hosts: ['www.doubao.com'], path: '/samantha/chat/completion' };

export default {
  name: 'doubao',
  // The composer's uploads: file input / drop / paste, chips, limits, the site's upload requests (./uploads.js).
  upload,
  hosts: ['www.doubao.com'],
  imageHosts: ['p3-flow-imagex-sign.byteimg.com'], // generated images (docs/files.md "Back / 回传")
  page,
  // CSP: www.doubao.com: no published policy (shared/reference/site-runtime.md §1b) —
  // so the strict stand-in: nonce-only scripts, connections only to the site's own origins.
  csp: strictCsp(['www.doubao.com']),
  endpoint: { method: 'POST', path: /^\/(samantha\/)?chat\/completion$/ },
  variants,
  variantMeta: meta,
  reasoningVariants: ['deep-think'],
  errorVariants: { 'stream-error': '710022004' },
  stream,
  contentType: 'text/event-stream',
};
