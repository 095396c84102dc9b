// The reference's verbatim samples (fixtures/, copied from shared/reference/sse-formats.md) parsed to the
// text a person sees, under many chunkings; its one-line error frames and request bodies too.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { adapters } from '../../src/adapters/index.js';
import { encodeConnectFrame } from '../../src/adapters/lib/connect.js';
import { byteChunks, joinChunks, randomChunks, runParser, summarize } from './harness.js';

const dir = new URL('./fixtures/', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('manifest.json', dir), 'utf8'));
const adapter = (name) => adapters.find((a) => a.name === name);
const utf8 = (s) => new TextEncoder().encode(s);

function expectText(site, bytes, answer, reasoning, label) {
  const chunkings = [[bytes], byteChunks(bytes), ...[1, 2, 3, 4, 5].map((k) => randomChunks(bytes, k, k * 7))];
  for (const chunks of chunkings) {
    const s = summarize(runParser(adapter(site), chunks));
    assert.deepEqual(s.errors, [], `${label}: no error`);
    assert.equal(s.done, 1, `${label}: one done`);
    assert.equal(s.answer, answer, `${label}: answer`);
    assert.equal(s.reasoning, reasoning, `${label}: reasoning`);
    assert.equal(s.afterTerminal, false, `${label}: nothing after done`);
  }
}

function expectError(site, bytes, code, label) {
  for (const chunks of [[bytes], byteChunks(bytes), randomChunks(bytes, 9, 11)]) {
    const s = summarize(runParser(adapter(site), chunks));
    assert.equal(s.done, 0, `${label}: not done`);
    assert.equal(s.errors.length, 1, `${label}: one error`);
    assert.equal(s.errors[0].code, String(code), `${label}: code`);
    assert.ok(s.errors[0].reason, `${label}: reason`);
  }
}

const readFixture = (name) => readFileSync(new URL(name, dir), 'utf8');
const short = (s) => (s.length > 40 ? `${s.slice(0, 40)}…` : s);

for (const f of manifest.streams) {
  const answer = f.answerFile ? readFixture(f.answerFile) : f.answer;
  const reasoning = f.reasoningFile ? readFixture(f.reasoningFile) : f.reasoning;
  test(`${f.kind || 'reference sample'} ${f.file} → ${JSON.stringify(short(answer))}`, () => {
    const text = readFixture(f.file);
    expectText(f.site, utf8(text), answer, reasoning, f.file);
    expectText(f.site, utf8(text.replace(/\n/g, '\r\n')), answer, reasoning, `${f.file} (CRLF)`);
  });
}

// Streams a site ends with an error: one error with the code, no done, and nothing that looks like a citation
// marker in the text that streamed before it.
for (const f of manifest.streamErrors || []) {
  test(`${f.kind} ${f.file} → error ${f.code}`, () => {
    const text = readFixture(f.file);
    for (const bytes of [utf8(text), utf8(text.replace(/\n/g, '\r\n'))]) {
      expectError(f.site, bytes, f.code, f.file);
      const s = summarize(runParser(adapter(f.site), [bytes]));
      assert.doesNotMatch(s.answer, /\[(reference|citation):\d+\]/, `${f.file}: no citation marker as text`);
    }
  });
}

test('every capture and constructed stream says where it comes from, when, and under what licence', () => {
  for (const f of [...manifest.streams, ...(manifest.streamErrors || [])]) {
    if (!f.kind) continue; // the reference's own samples (shared/reference/sse-formats.md)
    assert.ok(['capture', 'constructed'].includes(f.kind), `${f.file}: kind`);
    for (const field of ['source', 'date', 'licence']) assert.ok(f[field], `${f.file}: ${field}`);
    if (f.kind === 'constructed') assert.match(f.file, /constructed/, `${f.file}: a constructed stream says so in its name`);
  }
});

for (const f of manifest.requests) {
  test(`reference request ${f.file} → prompt ${JSON.stringify(f.prompt)}`, () => {
    const body = readFileSync(new URL(f.file, dir), 'utf8').trim();
    assert.equal(adapter(f.site).promptFromRequest(body), f.prompt);
  });
}

test('reference Kimi Connect frames → "你好，我是 Kimi"', () => {
  const frames = [
    '{"heartbeat":{}}',
    '{"op":"set","mask":"block.text","block":{"id":"b1","text":{"content":"你好"}}}',
    '{"op":"append","mask":"block.text.content","block":{"id":"b1","text":{"content":"，我是 Kimi"}}}',
    '{"op":"set","mask":"message.status","message":{"status":"MESSAGE_STATUS_COMPLETED"}}',
    '{"eventOffset":12,"done":{}}',
  ].map((j) => encodeConnectFrame(j));
  frames.push(encodeConnectFrame('{}', 2));
  expectText('kimi', joinChunks(frames), '你好，我是 Kimi', '', 'kimi connect');
});

test('Kimi Connect request body (binary frame) → prompt', () => {
  const json = '{"scenario":"SCENARIO_K2D5","chat_id":"","tools":[],"message":{"parent_id":"","role":"user","blocks":[{"message_id":"","text":{"content":"讲个笑话"}}],"scenario":"SCENARIO_K2D5"},"options":{"thinking":false}}';
  const body = new TextDecoder().decode(encodeConnectFrame(json));
  assert.equal(adapter('kimi').promptFromRequest(body), '讲个笑话');
});

test('Gemini f.req form body → prompt', () => {
  const inner = JSON.stringify([['写一首诗 "quoted" & more', 0, null, null, null, null, 0], ['en'], ['', '', '']]);
  const body = `f.req=${encodeURIComponent(JSON.stringify([null, inner]))}&at=${encodeURIComponent('AJvLN6M:1')}&`;
  assert.equal(adapter('gemini').promptFromRequest(body), '写一首诗 "quoted" & more');
});

test('reference legacy shapes: Claude completion, ChatGPT snapshots, tongyi, ChatGLM [DONE]', () => {
  expectText('claude', utf8(
    'event: completion\ndata: {"type":"completion","completion":" Hello","stop_reason":null,"model":"claude-2","log_id":"x","messageLimit":{"type":"within_limit"}}\n\n'
    + 'event: completion\ndata: {"type":"completion","completion":" there","stop_reason":"stop_sequence","model":"claude-2","log_id":"x","messageLimit":{"type":"within_limit"}}\n\n',
  ), ' Hello there', '', 'claude legacy');
  const snap = (text, status) => `data: {"message":{"id":"a1","author":{"role":"assistant"},"content":{"content_type":"text","parts":["${text}"]},"status":"${status}","end_turn":${status === 'finished_successfully'},"recipient":"all"},"conversation_id":"c","error":null}\n\n`;
  expectText('chatgpt', utf8(snap('你', 'in_progress') + snap('你好', 'in_progress') + snap('你好！', 'finished_successfully') + 'data: [DONE]\n\n'), '你好！', '', 'chatgpt legacy');
  const tongyi = (text, st) => `data: {"sessionId":"s","msgId":"m","msgStatus":"${st}","contentType":"text","contents":[{"contentType":"text","role":"assistant","content":"${text}"}],"canShare":true}\n\n`;
  expectText('qianwen', utf8(tongyi('我是', 'generating') + tongyi('我是通义', 'generating') + tongyi('我是通义千问', 'finished') + 'data: [DONE]\n\n'), '我是通义千问', '', 'tongyi legacy');
});

test('reference error frames → one error with the site code', () => {
  expectError('deepseek', utf8('event: ready\ndata: {"request_message_id":1,"response_message_id":2}\n\nevent: hint\ndata: {"type":"error","content":"...","clear_response":true,"finish_reason":"input_exceeds_limit"}\n\n'), 'input_exceeds_limit', 'deepseek hint');
  expectError('yuanbao', utf8('data: {"type":"error","msg":"回答拉取失败，正在重试","code":"21007","error":{}}\n\n'), '21007', 'yuanbao error');
  expectError('doubao', utf8('id: 3\nevent: STREAM_ERROR\ndata: {"error_code":710022004,"error_msg":"rate limited"}\n\n'), '710022004', 'doubao STREAM_ERROR');
  expectError('gemini', utf8(`)]}'\n\n120\n[["wrb.fr",null,null,null,null,[13,null,[["type.googleapis.com/assistant.boq.bard.application.BardErrorInfo",[1037]]]]]]\n`), '1037', 'gemini 1037');
  expectError('claude', utf8('event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}\n\n'), 'rate_limit_error', 'claude error');
  expectError('chatglm', utf8('data: {"status":40102,"message":"token expired"}\n\n'), '40102', 'chatglm auth');
  expectError('qianwen', utf8('event:message\ndata:{"data":{"messages":[],"status":"failed"},"error_code":20006,"error_msg":"busy","success":false}\n\n'), '20006', 'qianwen error_code');
  expectError('qianwen', utf8('event:message\ndata:{"data":{"messages":[],"status":"processing","audit_info":{"problem_code":"blocked"}},"error_code":0,"success":true}\n\n'), 'blocked', 'qianwen moderation');
  expectError('qianwen', utf8('data: {"error":{"code":"Bad_Request","details":"The chat is in progress!"}}\n\n'), 'Bad_Request', 'qwen intl error');
  expectError('kimi', utf8('data: {"event":"error","error":{"error_type":"auth.token.invalid","message":"您的授权已过期"}}\n\n'), 'auth.token.invalid', 'kimi legacy error');
  expectError('doubao', utf8('data: {"code":710022004,"message":"rate limited","event_data":"{}","event_type":2001}\n\n'), '710022004', 'doubao samantha code');
  expectError('yiyan', utf8('event:message\ndata:{"code":4001,"msg":"请先登录","data":null,"logId":null}\n\n'), '4001', 'yiyan top-level code');
  expectError('yiyan', utf8('event:message\ndata:{"code":0,"msg":"success","data":{"content":"","isBan":true,"is_end":0}}\n\n'), 'isBan', 'yiyan isBan');
  expectError('xinghuo', utf8('data:5L2g5aW9\n\ndata:[error]\n\ndata:{"key":20002,"descr":"今日次数已用完"}\n\ndata:<end>\n\n'), '20002', 'xinghuo [error] + JSON + <end>');
  expectError('xinghuo', utf8('data:[error]\n\ndata:{"key":10001,\n\ndata:"descr":"服务繁忙"}\n\n'), '10001', 'xinghuo error JSON over two lines, body ends before <end>');
  expectError('xinghuo', utf8('data:[geeError]\n\ndata:{"descr":"请完成验证"}\n\ndata:<end>\n\n'), 'geeError', 'xinghuo captcha');
  expectError('xinghuo', utf8('data:[belongerr]\n\n'), 'belongerr', 'xinghuo chat not the person\'s');
});

test('Spark: tool and image metadata pieces and unknown markers are not text; a missing <end> is incomplete', () => {
  const b64 = (s) => Buffer.from(s, 'utf8').toString('base64');
  const body = `data:${b64('{"allTool":[{"name":"ifly_search"}]}')}\n\ndata:<kx>\n\ndata:${b64('答案')}\n\ndata:${b64('{"multi_image_url":["https://x.invalid/a.png"]}')}\n\ndata:<end>\n\n`;
  expectText('xinghuo', utf8(body), '答案', '', 'xinghuo metadata');
  const cut = summarize(runParser(adapter('xinghuo'), [utf8(`data:${b64('半句')}\n\n`)]));
  assert.equal(cut.errors[0]?.code, 'incomplete');
});

test('ERNIE Bot: an end frame without tokens_all ends with its content; a thought is_end does not end the turn', () => {
  const ok = (event, data) => `event:${event}\ndata:${JSON.stringify({ code: 0, msg: 'success', data })}\n\n`;
  expectText('yiyan', utf8(ok('message', { content: '你好', is_end: 0 }) + ok('message', { content: '！', is_end: 1 })), '你好！', '', 'yiyan no tokens_all');
  const s = summarize(runParser(adapter('yiyan'), [utf8(ok('thought', { content: '想', is_end: 1 }))]));
  assert.equal(s.done, 0, 'the end of thinking is not the end of the turn');
  assert.equal(s.errors[0]?.code, 'incomplete');
});

test('a login JSON body instead of a stream is reported as trouble', () => {
  const s = summarize(runParser(adapter('yuanbao'), [utf8('{"error":{"code":"23000","message":"登录已过期，请重新登录"}}')]));
  assert.equal(s.errors.length, 1);
  assert.match(s.errors[0].reason, /log in|登录/);
});
