const { total } = require('./math');

function formatInvoice(items) {
  return `Total: ${total(items).toFixed(2)}`;
}

module.exports = { formatInvoice };
