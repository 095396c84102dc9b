// Endpoint matching on real URLs (and the URLs next to them that must not match), host lookup, trouble().

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { adapters, adapterForHost } from '../../src/adapters/index.js';

const adapter = (name) => adapters.find((a) => a.name === name);

const MATCH = {
  deepseek: [
    'https://chat.deepseek.com/api/v0/chat/completion',
    '/api/v0/chat/completion',
    'https://chat.deepseek.com/api/v0/chat/regenerate',
  ],
  doubao: [
    'https://www.doubao.com/chat/completion?aid=497858&device_id=1&device_platform=web&fp=verify_x&language=zh&pc_version=2.46.1&pkg_type=release_version&real_aid=497858&region=CN&samantha_web=1&sys_region=CN&version_code=20800&msToken=a&a_bogus=b',
    'https://www.doubao.com/samantha/chat/completion?aid=497858&device_platform=web&msToken=a&a_bogus=b',
  ],
  yuanbao: ['https://yuanbao.tencent.com/api/chat/6b1c7f0e-0d4e-4a3f-9c2b-8e5d7a1f3c20', '/api/chat/abc123'],
  qianwen: [
    'https://chat2.qianwen.com/api/v2/chat?biz_id=ai_qwen&chat_client=h5&device=pc&fr=pc&pr=qwen&ut=u&la=zh-CN&tz=Asia/Shanghai&nonce=1&timestamp=1',
    'https://chat.qwen.ai/api/v2/chat/completions?chat_id=c1',
    'https://qianwen.biz.aliyun.com/dialog/conversation',
  ],
  chatgpt: [
    'https://chatgpt.com/backend-api/f/conversation',
    'https://chatgpt.com/backend-anon/f/conversation',
    'https://chat.openai.com/backend-api/conversation',
  ],
  claude: [
    'https://claude.ai/api/organizations/5d1f0a8e-1111-4c2a-9e61-0a4b7c9d2e01/chat_conversations/8b2e6c1d-2222-4f3a-8d71-1b5c8e0f3a12/completion',
    'https://claude.ai/api/organizations/o/chat_conversations/c/retry_completion',
  ],
  gemini: [
    'https://gemini.google.com/_/BardChatUi/data/assistant.lamda.BardFrontendService/StreamGenerate?bl=boq_assistant-bard-web-server_20251118.06_p0&f.sid=-1&hl=en&_reqid=123456&rt=c',
    'https://gemini.google.com/u/1/_/BardChatUi/data/assistant.lamda.BardFrontendService/StreamGenerate?rt=c',
  ],
  kimi: [
    'https://kimi.moonshot.cn/api/chat/cljdett0tc12f8jcpc6g/completion/stream',
    'https://www.kimi.com/apiv2/kimi.gateway.chat.v1.ChatService/Chat',
  ],
  chatglm: ['https://chatglm.cn/chatglm/backend-api/assistant/stream'],
  yiyan: ['https://yiyan.baidu.com/eb/chat/conversation/v2', 'https://ernie.baidu.com/eb/chat/conversation/v2', '/eb/chat/conversation/v2', 'https://yiyan.baidu.com/eb/chat/conversation'],
  xinghuo: [
    'https://xinghuo.xfyun.cn/iflygpt-chat/u/chat_message/chat',
    'https://xinghuo.xfyun.cn/iflygpt/u/chat_message/chat',
    'https://xinghuo.xfyun.cn/iflygpt-longcontext/u/chat_message/web/chat',
    '/iflygpt-chat/u/chat_message/chat',
  ],
};

const NO_MATCH = {
  deepseek: ['https://chat.deepseek.com/api/v0/chat_session/create', 'https://chat.deepseek.com/api/v0/chat/create_pow_challenge', 'https://evil.example/api/v0/chat/completion'],
  doubao: ['https://www.doubao.com/chat/completion/extra', 'https://www.doubao.com/alice/message/list', 'https://www.doubao.com/samantha/chat/list'],
  yuanbao: ['https://yuanbao.tencent.com/api/user/agent/conversation/create', 'https://yuanbao.tencent.com/api/chat/abc/stop'],
  qianwen: ['https://chat.qwen.ai/api/v2/chats/new', 'https://chat2.qianwen.com/api/v2/session/list', 'https://example.com/api/v2/chat'],
  chatgpt: ['https://chatgpt.com/backend-api/f/conversation/prepare', 'https://chatgpt.com/backend-api/conversation/68f1c2aa', 'https://chatgpt.com/backend-api/conversations?offset=0'],
  claude: ['https://claude.ai/api/organizations/o/chat_conversations', 'https://claude.ai/api/organizations/o/chat_conversations/c', 'https://claude.ai/api/organizations/o/chat_conversations/c/title'],
  gemini: ['https://gemini.google.com/_/BardChatUi/data/batchexecute?rpcids=MaZiqc', 'https://gemini.google.com/app'],
  kimi: ['https://kimi.moonshot.cn/api/chat', 'https://www.kimi.com/apiv2/kimi.gateway.chat.v1.ChatService/ListChats'],
  chatglm: ['https://chatglm.cn/chatglm/backend-api/assistant/conversation/list', 'https://chatglm.cn/chatglm/user-api/user/info'],
  yiyan: ['https://yiyan.baidu.com/eb/chat/check', 'https://yiyan.baidu.com/eb/chat/history', 'https://yiyan.baidu.com/eb/session/new', 'https://chat.baidu.com/eb/chat/conversation/v2'],
  xinghuo: ['https://xinghuo.xfyun.cn/iflygpt/u/chat-list/v1/create-chat-list', 'https://xinghuo.xfyun.cn/iflygpt/userInfo', 'https://xinghuo.xfyun.cn/iflygpt/u/chat_message/chat/extra'],
};

for (const [name, urls] of Object.entries(MATCH)) {
  test(`${name}.matchRequest accepts its real stream endpoints (POST only)`, () => {
    for (const url of urls) {
      assert.equal(adapter(name).matchRequest(url, 'POST'), true, url);
      assert.equal(adapter(name).matchRequest(url, 'post'), true, `${url} (lower-case method)`);
      assert.equal(adapter(name).matchRequest(url, 'GET'), false, `${url} GET`);
      if (url.startsWith('http')) assert.equal(adapter(name).matchRequest(new URL(url), 'POST'), true, `${url} as URL object`);
    }
  });
  test(`${name}.matchRequest rejects neighbouring endpoints and other sites' endpoints`, () => {
    for (const url of NO_MATCH[name]) assert.equal(adapter(name).matchRequest(url, 'POST'), false, url);
    for (const [other, otherUrls] of Object.entries(MATCH)) {
      if (other === name) continue;
      for (const url of otherUrls) {
        if (!url.startsWith('http')) continue;
        assert.equal(adapter(name).matchRequest(url, 'POST'), false, `${name} must not match ${url}`);
      }
    }
  });
}

test('adapterForHost finds each site by its hostnames and nothing else', () => {
  const hosts = {
    'chat.deepseek.com': 'deepseek', 'www.doubao.com': 'doubao', 'yuanbao.tencent.com': 'yuanbao', 'tongyi.aliyun.com': 'qianwen',
    'www.qianwen.com': 'qianwen', 'chat.qwen.ai': 'qianwen', 'chatgpt.com': 'chatgpt', 'chat.openai.com': 'chatgpt', 'claude.ai': 'claude',
    'gemini.google.com': 'gemini', 'kimi.moonshot.cn': 'kimi', 'www.kimi.com': 'kimi', 'chatglm.cn': 'chatglm', 'CHATGPT.COM': 'chatgpt',
    'yiyan.baidu.com': 'yiyan', 'ernie.baidu.com': 'yiyan', 'xinghuo.xfyun.cn': 'xinghuo',
  };
  for (const [host, name] of Object.entries(hosts)) assert.equal(adapterForHost(host)?.name, name, host);
  for (const host of ['example.com', 'google.com', 'deepseek.com.evil.example', 'notclaude.ai', 'baidu.com', 'chat.baidu.com', 'xfyun.cn', '']) assert.equal(adapterForHost(host), null, host);
});

test('every adapter has the contract shape', () => {
  assert.equal(adapters.length, 11);
  for (const a of adapters) {
    assert.equal(typeof a.name, 'string');
    assert.ok(Array.isArray(a.hosts) && a.hosts.length > 0);
    for (const fn of ['matchRequest', 'promptFromRequest', 'createParser', 'trouble']) assert.equal(typeof a[fn], 'function', `${a.name}.${fn}`);
    assert.ok(['textarea', 'contenteditable'].includes(a.input.kind), `${a.name} input kind`);
    assert.ok(a.input.selectors.length > 0 && a.send.selectors.length > 0);
    assert.equal(a.send.key, 'Enter');
    const p = a.createParser();
    assert.deepEqual(p.push(new Uint8Array(0)), []);
    assert.equal(a.promptFromRequest('not json'), null, `${a.name} prompt from garbage`);
  }
});

test('trouble(): 429, captcha and login pages, site codes; a healthy stream is no trouble', () => {
  for (const a of adapters) {
    assert.match(a.trouble(429, ''), /429/, a.name);
    assert.match(a.trouble(401, '{"detail":"Unauthorized"}'), /log in|登录/, a.name);
    assert.match(a.trouble(403, '<html><title>Just a moment...</title><script src="/cdn-cgi/challenge-platform/h/b/orchestrate"></script></html>'), /captcha|人机验证/, a.name);
    assert.match(a.trouble(200, '<!DOCTYPE html><html><body><form action="/login">请登录</form></body></html>'), /log in|登录/, a.name);
    assert.match(a.trouble(502, 'Bad gateway'), /502/, a.name);
    assert.equal(a.trouble(200, 'data: {"v":"the word captcha inside a reply is fine"}\n\n'), null, a.name);
    assert.equal(a.trouble(200, ''), null, a.name);
  }
  assert.match(adapter('doubao').trouble(200, '{"code":710022004,"msg":"rate limited"}'), /限流/);
  assert.match(adapter('yuanbao').trouble(200, '{"error":{"code":"23000","message":"登录已过期，请重新登录"}}'), /登录/);
  assert.match(adapter('gemini').trouble(200, `)]}'\n\n120\n[["wrb.fr",null,null,null,null,[13,null,[["x",[1037]]]]]]`), /usage limit|上限/);
  assert.match(adapter('qianwen').trouble(200, '{"rgv587_flag":"sm","url":"https://example.invalid/punish"}'), /captcha|人机验证/);
  assert.match(adapter('chatglm').trouble(200, '{"status":40102,"message":"token expired"}'), /登录/);
});
