// A chat page without a browser, just enough for the task runner's own code (input.js) to find the
// box, read it, type into it and press send: one textarea and one send button. Pressing send
// records what the box held (what the site sent) and empties the box, as a site does.

class FakeElement {
  constructor(doc, tagName) {
    this.ownerDocument = doc;
    this.tagName = tagName;
    this.isConnected = true;
    this.attrs = {};
  }

  getBoundingClientRect() {
    return { x: 0, y: 500, left: 0, top: 500, right: 600, bottom: 560, width: 600, height: 60 };
  }

  getAttribute(name) {
    return this.attrs[name] ?? null;
  }

  closest() {
    return null;
  }

  querySelector() {
    return null;
  }

  focus() {}

  dispatchEvent() {
    return true;
  }
}

class FakeTextArea extends FakeElement {
  constructor(doc) {
    super(doc, 'TEXTAREA');
    this.current = '';
  }

  get value() {
    return this.current;
  }

  set value(v) {
    this.current = String(v);
  }
}

class FakeButton extends FakeElement {
  constructor(doc, onClick) {
    super(doc, 'BUTTON');
    this.disabled = false;
    this.onClick = onClick;
  }

  click() {
    this.onClick();
  }
}

class FakeEvent {
  constructor(type, init = {}) {
    Object.assign(this, init, { type });
  }
}

/**
 * `{doc, adapter, box, sent}`: `box.value` is the input box's text; `sent` lists each message the
 * page sent.
 */
export function fakeChatPage() {
  const sent = [];
  const win = {
    HTMLTextAreaElement: FakeTextArea,
    HTMLInputElement: FakeTextArea,
    InputEvent: FakeEvent,
    Event: FakeEvent,
    KeyboardEvent: FakeEvent,
    getComputedStyle: () => ({ visibility: 'visible', display: 'block', opacity: '1' }),
  };
  const doc = { defaultView: win };
  const box = new FakeTextArea(doc);
  const send = new FakeButton(doc, () => {
    sent.push(box.value);
    box.value = '';
  });
  doc.querySelectorAll = (sel) => {
    if (sel === '#box') return [box];
    if (sel === '#send') return [send];
    if (/button/.test(sel)) return [send];
    if (/textarea/.test(sel)) return [box];
    return [];
  };
  const adapter = { name: 'fake', input: { selectors: ['#box'] }, send: { selectors: ['#send'] } };
  return { doc, adapter, box, sent };
}
