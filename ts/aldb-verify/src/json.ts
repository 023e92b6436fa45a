/**
 * A strict JSON parser that keeps integers exact: JSON.parse turns 18446744073709551615 (a u64
 * lamports or slot value) into 18446744073709552000. Here an integer literal that is not a safe
 * JavaScript integer becomes a `bigint`; everything else is what JSON.parse would return.
 */

import { AldbError } from "./errors.js";

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [k: string]: JsonValue };

export function parseJson(text: string): JsonValue {
  let i = 0;
  const fail = (what: string): never => {
    throw new AldbError("json_syntax", `${what} at offset ${i}`);
  };
  const ws = () => {
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) i++;
      else break;
    }
  };
  const value = (depth: number): JsonValue => {
    if (depth > 512) fail("nesting too deep");
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj: { [k: string]: JsonValue } = {};
      ws();
      if (text[i] === "}") {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a string key");
        const k = string();
        ws();
        if (text[i] !== ":") fail("expected ':'");
        i++;
        const v = value(depth + 1);
        if (Object.prototype.hasOwnProperty.call(obj, k)) fail(`duplicate key ${JSON.stringify(k)}`);
        Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") {
          i++;
          return obj;
        } else fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const arr: JsonValue[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") {
          i++;
          return arr;
        } else fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    if (text.startsWith("true", i)) {
      i += 4;
      return true;
    }
    if (text.startsWith("false", i)) {
      i += 5;
      return false;
    }
    if (text.startsWith("null", i)) {
      i += 4;
      return null;
    }
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!m) return fail("unexpected character");
    i += m[0].length;
    if (m[2] === undefined && m[3] === undefined) {
      const n = Number(m[0]);
      return Number.isSafeInteger(n) ? n : BigInt(m[0]);
    }
    return Number(m[0]);
  };
  const string = (): string => {
    i++; // opening quote
    let out = "";
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const c = text.charCodeAt(i);
      if (c === 34) {
        i++;
        return out;
      }
      if (c < 0x20) fail("control character in string");
      if (c === 92) {
        const e = text[i + 1];
        const simple: { [k: string]: string } = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
        if (e in simple) {
          out += simple[e];
          i += 2;
        } else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
          i += 6;
        } else fail("bad escape");
      } else {
        out += text[i];
        i++;
      }
    }
  };
  const v = value(0);
  ws();
  if (i !== text.length) fail("trailing characters");
  return v;
}

/** JSON.stringify that writes bigints as plain integer literals. */
export function stringifyJson(value: unknown): string {
  const marks: string[] = [];
  const s = JSON.stringify(value, (_k, v) => {
    if (typeof v === "bigint") {
      marks.push(v.toString());
      return `\u0000bigint${marks.length - 1}\u0000`;
    }
    return v;
  });
  return s.replace(/"\\u0000bigint(\d+)\\u0000"/g, (_m, n) => marks[Number(n)]);
}
