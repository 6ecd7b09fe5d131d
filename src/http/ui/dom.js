// DOM building: `h(tag, attrs, ...children)` creates elements without ever parsing HTML, so text
// from the server can never become markup. Attributes: `class`, `for`, `on*` handlers (functions,
// attached with addEventListener, never as markup attributes), booleans, everything else as an
// attribute. Children: nodes, strings, numbers, arrays, null/false (skipped).

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else if (k === 'checked' && 'checked' in el) el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** An HTML element. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs && (attrs instanceof Node || typeof attrs !== 'object' || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  apply(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/** Replaces the children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A link to a hash route: `link('#/streams/x', 'x')`. */
export function link(href, ...children) {
  return h('a', { href }, ...children);
}

/** A button; `kind` is a class such as 'primary' or 'danger'. */
export function button(label, onClick, kind = '', attrs = {}) {
  return h('button', { type: 'button', class: `btn ${kind}`.trim(), onclick: onClick, ...attrs }, label);
}
