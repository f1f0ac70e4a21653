const test = require('node:test');
const assert = require('node:assert');
const { add, total } = require('../src/math');
const { formatInvoice } = require('../src/invoice');

test('add adds', () => assert.strictEqual(add(2, 3), 5));
test('total sums price times quantity', () => assert.strictEqual(total([{ price: 2, qty: 3 }, { price: 1, qty: 1 }]), 7));
test('formatInvoice shows two decimals', () => assert.strictEqual(formatInvoice([{ price: 1.5, qty: 2 }]), 'Total: 3.00'));
