// The protected block: the person's draft around an inserted block.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { composeWithDraft } from '../../src/core/input.js';

test('empty draft gives the block alone', () => {
  assert.equal(composeWithDraft('', 'BLOCK'), 'BLOCK');
});

test('block goes after the draft by default, on its own line', () => {
  assert.equal(composeWithDraft('draft', 'BLOCK'), 'draft\nBLOCK');
  assert.equal(composeWithDraft('draft\n', 'BLOCK'), 'draft\nBLOCK');
});

test('block goes at the caret, text before and after kept', () => {
  assert.equal(composeWithDraft('before after', 'BLOCK', 7), 'before \nBLOCK\nafter');
  assert.equal(composeWithDraft('头\n尾', 'B', 2), '头\nB\n尾');
  assert.equal(composeWithDraft('abc', 'B', 0), 'B\nabc');
});
