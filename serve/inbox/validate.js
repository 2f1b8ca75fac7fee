// A small JSON Schema checker for edited tool inputs, so a person sees
// what is wrong before sending. It covers type (including integer and
// type lists), required, properties, additionalProperties: false, items,
// enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// minLength, maxLength, pattern, minItems and maxItems. Anything else in a
// schema is left to the server, which checks every edit again with
// toolrun's own validator. Messages follow toolrun's: "/pointer: expected
// X, got Y".
"use strict";

(function () {
  function typeOf(v) {
    if (v === null) return "null";
    if (Array.isArray(v)) return "array";
    if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
    return typeof v; // string, boolean, object
  }

  function fits(v, t) {
    var got = typeOf(v);
    return got === t || (t === "number" && got === "integer");
  }

  function show(v) {
    var s = JSON.stringify(v);
    if (s !== undefined && s.length > 60) s = s.slice(0, 60) + "…";
    return s + " (" + typeOf(v) + ")";
  }

  function esc(key) {
    return String(key).replace(/~/g, "~0").replace(/\//g, "~1");
  }

  function check(schema, v, ptr, out) {
    if (schema === true || schema === undefined || schema === null) return;
    if (schema === false) {
      out.push({ pointer: ptr, expected: "nothing (the schema is false)", got: show(v) });
      return;
    }
    if (schema.type !== undefined) {
      var types = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (!types.some(function (t) { return fits(v, t); })) {
        out.push({ pointer: ptr, expected: types.map(function (t) { return "type \"" + t + "\""; }).join(" or "), got: show(v) });
        return;
      }
    }
    if (schema.enum !== undefined) {
      var js = JSON.stringify(v);
      if (!schema.enum.some(function (e) { return JSON.stringify(e) === js; })) {
        out.push({ pointer: ptr, expected: "one of " + JSON.stringify(schema.enum), got: show(v) });
      }
    }
    if (schema.const !== undefined && JSON.stringify(schema.const) !== JSON.stringify(v)) {
      out.push({ pointer: ptr, expected: "the value " + JSON.stringify(schema.const), got: show(v) });
    }
    if (typeof v === "number") {
      if (schema.minimum !== undefined && v < schema.minimum) out.push({ pointer: ptr, expected: "a number ≥ " + schema.minimum, got: show(v) });
      if (schema.maximum !== undefined && v > schema.maximum) out.push({ pointer: ptr, expected: "a number ≤ " + schema.maximum, got: show(v) });
      if (typeof schema.exclusiveMinimum === "number" && v <= schema.exclusiveMinimum) out.push({ pointer: ptr, expected: "a number > " + schema.exclusiveMinimum, got: show(v) });
      if (typeof schema.exclusiveMaximum === "number" && v >= schema.exclusiveMaximum) out.push({ pointer: ptr, expected: "a number < " + schema.exclusiveMaximum, got: show(v) });
    }
    if (typeof v === "string") {
      var n = Array.from(v).length;
      if (schema.minLength !== undefined && n < schema.minLength) out.push({ pointer: ptr, expected: "a string of at least " + schema.minLength + " characters", got: show(v) });
      if (schema.maxLength !== undefined && n > schema.maxLength) out.push({ pointer: ptr, expected: "a string of at most " + schema.maxLength + " characters", got: show(v) });
      if (schema.pattern !== undefined) {
        var re = null;
        try { re = new RegExp(schema.pattern, "u"); } catch (e) { re = null; }
        if (re && !re.test(v)) out.push({ pointer: ptr, expected: "a string matching " + JSON.stringify(schema.pattern), got: show(v) });
      }
    }
    if (Array.isArray(v)) {
      if (schema.minItems !== undefined && v.length < schema.minItems) out.push({ pointer: ptr, expected: "at least " + schema.minItems + " items", got: v.length + " items" });
      if (schema.maxItems !== undefined && v.length > schema.maxItems) out.push({ pointer: ptr, expected: "at most " + schema.maxItems + " items", got: v.length + " items" });
      if (schema.items && typeof schema.items === "object") {
        v.forEach(function (item, i) { check(schema.items, item, ptr + "/" + i, out); });
      }
    }
    if (typeOf(v) === "object") {
      var props = schema.properties || {};
      (schema.required || []).forEach(function (k) {
        if (!Object.prototype.hasOwnProperty.call(v, k)) out.push({ pointer: ptr + "/" + esc(k), expected: "required property " + JSON.stringify(k), got: "missing" });
      });
      Object.keys(v).forEach(function (k) {
        if (Object.prototype.hasOwnProperty.call(props, k)) {
          check(props[k], v[k], ptr + "/" + esc(k), out);
        } else if (schema.additionalProperties === false) {
          out.push({ pointer: ptr + "/" + esc(k), expected: "no additional properties", got: "property " + JSON.stringify(k) });
        } else if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
          check(schema.additionalProperties, v[k], ptr + "/" + esc(k), out);
        }
      });
    }
  }

  // validateInput returns the problems of value against schema, each as
  // a line "/pointer: expected X, got Y" ("(root)" for the root).
  function validateInput(schema, value) {
    var out = [];
    if (typeOf(value) !== "object") {
      out.push({ pointer: "", expected: "type \"object\"", got: show(value) });
    } else {
      check(schema || {}, value, "", out);
    }
    return out.map(function (p) { return (p.pointer || "(root)") + ": expected " + p.expected + ", got " + p.got; });
  }

  window.toolrunValidate = validateInput;
})();
