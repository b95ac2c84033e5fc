/* The sidecar's OTLP on the protobuf wire: requests read and spliced in one pass, result fields encoded in one pass.
 *
 * The sidecar reads every span of every request it receives, and adds a run's results to its root. Through
 * protobuf's Python API each field read or set is a call into upb (about half a microsecond), and a span
 * needs some thirty of them, a run's results some hundred.
 *
 * Reading (read_request, read_span) walks the wire format once and builds the views normalization reads:
 * ``Span`` and ``Event`` struct sequences whose fields are named as in ``trajgrade.core.spans.SpanView``, ids as
 * lower-case hex, attribute values as plain Python values (arrays as tuples, key-value lists as dicts; a
 * later duplicate key wins).
 *
 * It reads the fields of ``ExportTraceServiceRequest`` that grading needs, by their OTLP field numbers (a
 * resource's attributes, a scope's name, a span's ids, name, kind, times, attributes, events, status and
 * flags), and follows protobuf's parsing rules: unknown fields, and known fields with another wire type, are
 * skipped; a singular message field given twice is merged; a scalar given twice takes the last value;
 * strings must be UTF-8. Anything malformed raises ValueError naming the field and the byte offset.
 *
 * The strings every span repeats (attribute keys, short values, span names, trace and parent ids) are read as one
 * object each, from small tables by their bytes, rather than decoded anew on every span.
 *
 * Splicing (splice_spans) takes spans out of a request: every other field copied as it came, the messages that
 * held them written anew; each span comes with its resource and scope fields, for a request of its own.
 *
 * Encoding (encode_result_fields) writes a run's result events and verdict attributes as ``Span`` fields
 * (events = 11, attributes = 9), to be appended to the root's own bytes (concatenated messages merge);
 * encode_log_record writes one log event as a ``ScopeLogs.log_records`` entry.
 *
 * ``tests/sidecar/test_protowire.py`` checks them against protobuf's own parser and serializer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* How deep the reader follows nested values and groups: twice the nesting request checking allows (a
 * key-value list is two of the reader's levels), a bound for the stack when a span is read unchecked. */
#define MAX_DEPTH 200
#define MAX_MESSAGE_DEPTH 100

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Buf;

typedef struct {
    const uint8_t *base; /* the whole body, for offsets in error messages */
    PyObject *keys;      /* a set of attribute keys to keep, or NULL for all */
    const char **prefixes;
    Py_ssize_t *prefix_lens;
    Py_ssize_t n_prefixes;
    int quiet; /* run without the interpreter's lock: a failure raises nothing (the caller runs again to name it) */
} Reader;

static PyTypeObject SpanType;
static PyTypeObject EventType;

enum {
    S_TRACE_ID, S_SPAN_ID, S_PARENT_SPAN_ID, S_PARENT_IS_REMOTE, S_NAME, S_KIND, S_START, S_END,
    S_STATUS_CODE, S_STATUS_MESSAGE, S_ATTRIBUTES, S_EVENTS, S_RESOURCE, S_SCOPE, S_RESOURCE_INDEX,
    S_SCOPE_INDEX, S_INDEX, S_SIZE, S_FIELDS
};

static PyStructSequence_Field span_fields[] = {
    {"trace_id", "lower-case hex"},
    {"span_id", "lower-case hex"},
    {"parent_span_id", "lower-case hex, or None"},
    {"parent_is_remote", "from the span's flags; None when it has no parent or the flags do not say"},
    {"name", NULL},
    {"kind", "the OTLP SpanKind number"},
    {"start_unix_nano", NULL},
    {"end_unix_nano", "the start when the span has no end"},
    {"status_code", "0 unset, 1 ok, 2 error"},
    {"status_message", NULL},
    {"attributes", "a dict of plain values"},
    {"events", "a tuple of Event"},
    {"resource_attributes", "its resource's attributes (one dict per resource)"},
    {"scope_name", NULL},
    {"resource_index", "the position of its ResourceSpans in the request"},
    {"scope_index", "the position of its ScopeSpans in the ResourceSpans"},
    {"index", "its position in the ScopeSpans"},
    {"size", "its length in bytes on the wire"},
    {NULL, NULL},
};
static PyStructSequence_Desc span_desc = {"trajgrade.doors.sidecar._protowire.Span", "An OTLP span, read.", span_fields,
                                          S_FIELDS};

static PyStructSequence_Field event_fields[] = {
    {"name", NULL}, {"time_unix_nano", NULL}, {"attributes", "a dict of plain values"}, {NULL, NULL}};
static PyStructSequence_Desc event_desc = {"trajgrade.doors.sidecar._protowire.Event", "A span event, read.", event_fields,
                                           3};

/* --- the wire format ------------------------------------------------------------------------------- */
static int fail(const Reader *r, const uint8_t *at, const char *what) {
    if (!r->quiet) PyErr_Format(PyExc_ValueError, "%s at byte %zd", what, (Py_ssize_t)(at - r->base));
    return -1;
}

static int varint_long(const Reader *r, Buf *b, uint64_t *out) {
    uint64_t v = 0;
    const uint8_t *start = b->p;
    for (int shift = 0; shift < 70; shift += 7) {
        if (b->p >= b->end) return fail(r, start, "truncated varint");
        uint8_t c = *b->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return fail(r, start, "varint longer than 10 bytes");
}

/* Most varints on the wire (tags, lengths of short fields, small ints) are one byte: read inline. */
static inline int varint(const Reader *r, Buf *b, uint64_t *out) {
    if (b->p < b->end && !(*b->p & 0x80)) {
        *out = *b->p++;
        return 0;
    }
    return varint_long(r, b, out);
}

static int fixed(const Reader *r, Buf *b, int size, uint64_t *out) {
    if (b->end - b->p < size) return fail(r, b->p, "truncated fixed-size field");
    uint64_t v = 0;
    for (int i = size - 1; i >= 0; i--) v = (v << 8) | b->p[i];
    b->p += size;
    *out = v;
    return 0;
}

static inline int delimited(const Reader *r, Buf *b, Buf *out) {
    uint64_t n;
    const uint8_t *at = b->p;
    if (varint(r, b, &n) < 0) return -1;
    if (n > (uint64_t)(b->end - b->p)) return fail(r, at, "length past the end of its message");
    out->p = b->p;
    out->end = b->p + n;
    b->p += n;
    return 0;
}

static inline int tag(const Reader *r, Buf *b, uint32_t *field, int *wire) {
    uint64_t key;
    const uint8_t *at = b->p;
    if (varint(r, b, &key) < 0) return -1;
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff) return fail(r, at, "invalid field number");
    *field = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    return 0;
}

static int skip(const Reader *r, Buf *b, uint32_t field, int wire, int depth) {
    uint64_t ignored;
    Buf inner;
    switch (wire) {
    case 0: return varint(r, b, &ignored);
    case 1: return fixed(r, b, 8, &ignored);
    case 2: return delimited(r, b, &inner);
    case 5: return fixed(r, b, 4, &ignored);
    case 3: /* a group: skip to its matching end */
        if (depth >= MAX_DEPTH) return fail(r, b->p, "groups nested too deep");
        while (b->p < b->end) {
            uint32_t f;
            int w;
            if (tag(r, b, &f, &w) < 0) return -1;
            if (w == 4) return f == field ? 0 : fail(r, b->p, "unmatched end of group");
            if (skip(r, b, f, w, depth + 1) < 0) return -1;
        }
        return fail(r, b->p, "unterminated group");
    default: return fail(r, b->p, "invalid wire type");
    }
}

static PyObject *utf8(const Reader *r, const Buf *s, const char *field) {
    PyObject *out = PyUnicode_DecodeUTF8((const char *)s->p, s->end - s->p, "strict");
    if (out == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s is not valid UTF-8 at byte %zd", field, (Py_ssize_t)(s->p - r->base));
    }
    return out;
}

static const char HEX_DIGITS[] = "0123456789abcdef";

static PyObject *hex(const Buf *s) {
    Py_ssize_t n = s->end - s->p;
    PyObject *out = PyUnicode_New(2 * n, 127);
    if (out == NULL) return NULL;
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        d[2 * i] = HEX_DIGITS[s->p[i] >> 4];
        d[2 * i + 1] = HEX_DIGITS[s->p[i] & 15];
    }
    return out;
}

/* Strings that come again and again (attribute keys, the short values and names every span of an instrumentation
 * carries: "chat", the model's name, the span's name) as one object each, rather than decoded anew on every span
 * (and hashed again, for a key, by the set of keys read and the attribute dict). An ASCII string of up to
 * SHARED_MAX bytes is kept in a slot of its table chosen by a hash of its bytes, and replaced when another string
 * takes the slot; the others are decoded each time. */
#define SHARED_SLOTS 1024
#define SHARED_MAX 128
static PyObject *shared_keys[SHARED_SLOTS];
static PyObject *shared_values[SHARED_SLOTS];

/* A hash of a string's bytes for its slot: eight bytes at a time, each word mixed in by a multiplication (its
 * high half is returned, where the multiplications have mixed every bit of the words). */
static uint32_t slot_hash(const Buf *s) {
    uint64_t h = (uint64_t)(s->end - s->p) * 0x9e3779b97f4a7c15ULL;
    const uint8_t *p = s->p;
    for (; s->end - p >= 8; p += 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        h = (h ^ word) * 0xff51afd7ed558ccdULL;
    }
    if (p < s->end) {
        uint64_t word = 0;
        memcpy(&word, p, (size_t)(s->end - p));
        h = (h ^ word) * 0xff51afd7ed558ccdULL;
    }
    return (uint32_t)(h >> 32);
}

static PyObject *shared_utf8(const Reader *r, const Buf *s, const char *field, PyObject **table) {
    Py_ssize_t n = s->end - s->p;
    if (n > SHARED_MAX) return utf8(r, s, field);
    PyObject **slot = &table[slot_hash(s) & (SHARED_SLOTS - 1)];
    PyObject *kept = *slot;
    if (kept != NULL && PyUnicode_GET_LENGTH(kept) == n && memcmp(PyUnicode_1BYTE_DATA(kept), s->p, n) == 0)
        return Py_NewRef(kept);
    PyObject *out = utf8(r, s, field);
    if (out != NULL && PyUnicode_IS_ASCII(out)) {
        if (table == shared_keys) (void)PyObject_Hash(out); /* computed once, kept with it */
        Py_XSETREF(*slot, Py_NewRef(out));
    }
    return out;
}

/* The ids the spans of a trace share (its trace id; their parent's span id), as hex, one object each in the same
 * way (a span's own id is its alone: it is written anew). */
static PyObject *shared_ids[SHARED_SLOTS];

static PyObject *shared_hex(const Buf *s) {
    Py_ssize_t n = s->end - s->p;
    PyObject **slot = &shared_ids[slot_hash(s) & (SHARED_SLOTS - 1)];
    PyObject *kept = *slot;
    if (kept != NULL && PyUnicode_GET_LENGTH(kept) == 2 * n) {
        const Py_UCS1 *d = PyUnicode_1BYTE_DATA(kept);
        Py_ssize_t i = 0;
        while (i < n && d[2 * i] == HEX_DIGITS[s->p[i] >> 4] && d[2 * i + 1] == HEX_DIGITS[s->p[i] & 15]) i++;
        if (i == n) return Py_NewRef(kept);
    }
    PyObject *out = hex(s);
    if (out != NULL) {
        (void)PyObject_Hash(out);
        Py_XSETREF(*slot, Py_NewRef(out));
    }
    return out;
}

static void replace(PyObject **slot, PyObject *value) {
    Py_XSETREF(*slot, value);
}

/* --- AnyValue and KeyValue ------------------------------------------------------------------------- */
enum { V_UNSET, V_SCALAR, V_ARRAY, V_KVLIST };

typedef struct {
    int kind;
    PyObject *value; /* a list while an array is read, a dict for a kvlist */
} Value;

static int keyvalues(const Reader *r, Buf *b, PyObject *into, int filtered, int depth);

static int anyvalue(const Reader *r, Buf *b, Value *v, int depth) {
    if (depth >= MAX_DEPTH) return fail(r, b->p, "AnyValue nested too deep");
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        uint64_t n;
        Buf s;
        PyObject *item;
        if (tag(r, b, &field, &wire) < 0) return -1;
        if (field == 1 && wire == 2) { /* string_value */
            if (delimited(r, b, &s) < 0) return -1;
            if ((item = shared_utf8(r, &s, "string_value", shared_values)) == NULL) return -1;
        } else if (field == 2 && wire == 0) { /* bool_value */
            if (varint(r, b, &n) < 0) return -1;
            item = PyBool_FromLong(n != 0);
        } else if (field == 3 && wire == 0) { /* int_value */
            if (varint(r, b, &n) < 0 || (item = PyLong_FromLongLong((int64_t)n)) == NULL) return -1;
        } else if (field == 4 && wire == 1) { /* double_value */
            double d;
            if (fixed(r, b, 8, &n) < 0) return -1;
            memcpy(&d, &n, sizeof d);
            if ((item = PyFloat_FromDouble(d)) == NULL) return -1;
        } else if (field == 5 && wire == 2) { /* array_value: its values (field 1) are appended */
            if (delimited(r, b, &s) < 0) return -1;
            if (v->kind != V_ARRAY) {
                PyObject *list = PyList_New(0);
                if (list == NULL) return -1;
                replace(&v->value, list);
                v->kind = V_ARRAY;
            }
            while (s.p < s.end) {
                uint32_t f;
                int w;
                Buf e;
                if (tag(r, &s, &f, &w) < 0) return -1;
                if (f != 1 || w != 2) {
                    if (skip(r, &s, f, w, depth) < 0) return -1;
                    continue;
                }
                if (delimited(r, &s, &e) < 0) return -1;
                Value element = {V_UNSET, NULL};
                if (anyvalue(r, &e, &element, depth + 1) < 0) {
                    Py_XDECREF(element.value);
                    return -1;
                }
                PyObject *plain = element.value ? element.value : Py_NewRef(Py_None);
                if (element.kind == V_ARRAY) {
                    plain = PyList_AsTuple(element.value);
                    Py_DECREF(element.value);
                    if (plain == NULL) return -1;
                }
                int rc = PyList_Append(v->value, plain);
                Py_DECREF(plain);
                if (rc < 0) return -1;
            }
            continue;
        } else if (field == 6 && wire == 2) { /* kvlist_value */
            if (delimited(r, b, &s) < 0) return -1;
            if (v->kind != V_KVLIST) {
                PyObject *dict = PyDict_New();
                if (dict == NULL) return -1;
                replace(&v->value, dict);
                v->kind = V_KVLIST;
            }
            if (keyvalues(r, &s, v->value, 0, depth + 1) < 0) return -1;
            continue;
        } else if (field == 7 && wire == 2) { /* bytes_value */
            if (delimited(r, b, &s) < 0) return -1;
            if ((item = PyBytes_FromStringAndSize((const char *)s.p, s.end - s.p)) == NULL) return -1;
        } else {
            if (skip(r, b, field, wire, depth) < 0) return -1;
            continue;
        }
        if (item == NULL) return -1;
        replace(&v->value, item);
        v->kind = V_SCALAR;
    }
    return 0;
}

static int wanted(const Reader *r, const Buf *key, PyObject *name) {
    Py_ssize_t n = key->end - key->p;
    for (Py_ssize_t i = 0; i < r->n_prefixes; i++)
        if (n >= r->prefix_lens[i] && memcmp(key->p, r->prefixes[i], r->prefix_lens[i]) == 0) return 1;
    return PySet_Contains(r->keys, name);
}

/* A KeyValue: the key may come after the value, and either may repeat (the last key wins; values merge). */
static int keyvalue(const Reader *r, Buf *b, PyObject *into, int filtered, int depth) {
    Buf key = {b->p, b->p}, s;
    const uint8_t *start = b->p;
    int values = 0;
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        if (tag(r, b, &field, &wire) < 0) return -1;
        if (field == 1 && wire == 2) {
            if (delimited(r, b, &key) < 0) return -1;
        } else if (field == 2 && wire == 2) {
            if (delimited(r, b, &s) < 0) return -1;
            values++;
        } else if (skip(r, b, field, wire, depth) < 0) {
            return -1;
        }
    }
    PyObject *name = shared_utf8(r, &key, "attribute key", shared_keys);
    if (name == NULL) return -1;
    if (filtered) {
        int keep = wanted(r, &key, name);
        if (keep <= 0) {
            Py_DECREF(name);
            return keep;
        }
    }
    Value v = {V_UNSET, NULL};
    /* Read the value occurrences in order, into one value (protobuf merges a repeated message field). */
    Buf again = {start, b->end};
    while (values && again.p < again.end) {
        uint32_t field;
        int wire;
        if (tag(r, &again, &field, &wire) < 0) goto error;
        if (field == 2 && wire == 2) {
            if (delimited(r, &again, &s) < 0 || anyvalue(r, &s, &v, depth + 1) < 0) goto error;
        } else if (skip(r, &again, field, wire, depth) < 0) {
            goto error;
        }
    }
    PyObject *plain = v.value ? v.value : Py_NewRef(Py_None);
    if (v.kind == V_ARRAY) {
        plain = PyList_AsTuple(v.value);
        Py_CLEAR(v.value);
        if (plain == NULL) goto error;
    }
    int rc = PyDict_SetItem(into, name, plain);
    Py_DECREF(plain);
    Py_DECREF(name);
    return rc;
error:
    Py_XDECREF(v.value);
    Py_DECREF(name);
    return -1;
}

/* The KeyValue entries of a message's field 1 (KeyValueList) into a dict. */
static int keyvalues(const Reader *r, Buf *b, PyObject *into, int filtered, int depth) {
    if (depth >= MAX_DEPTH) return fail(r, b->p, "key-value list nested too deep");
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        Buf s;
        if (tag(r, b, &field, &wire) < 0) return -1;
        if (field == 1 && wire == 2) {
            if (delimited(r, b, &s) < 0 || keyvalue(r, &s, into, filtered, depth) < 0) return -1;
        } else if (skip(r, b, field, wire, depth) < 0) {
            return -1;
        }
    }
    return 0;
}

/* --- Span --------------------------------------------------------------------------------------------- */
static PyObject *event(const Reader *r, Buf *b) {
    PyObject *name = NULL, *attributes = PyDict_New();
    uint64_t time = 0;
    if (attributes == NULL) return NULL;
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        Buf s;
        if (tag(r, b, &field, &wire) < 0) goto error;
        if (field == 1 && wire == 1) {
            if (fixed(r, b, 8, &time) < 0) goto error;
        } else if (field == 2 && wire == 2) {
            PyObject *value;
            if (delimited(r, b, &s) < 0) goto error;
            if ((value = shared_utf8(r, &s, "event name", shared_values)) == NULL) goto error;
            replace(&name, value);
        } else if (field == 3 && wire == 2) {
            if (delimited(r, b, &s) < 0 || keyvalue(r, &s, attributes, 0, 1) < 0) goto error;
        } else if (skip(r, b, field, wire, 0) < 0) {
            goto error;
        }
    }
    PyObject *out = PyStructSequence_New(&EventType);
    if (out == NULL) goto error;
    PyStructSequence_SET_ITEM(out, 0, name ? name : PyUnicode_New(0, 0));
    PyStructSequence_SET_ITEM(out, 1, PyLong_FromUnsignedLongLong(time));
    PyStructSequence_SET_ITEM(out, 2, attributes);
    if (PyStructSequence_GET_ITEM(out, 0) == NULL || PyStructSequence_GET_ITEM(out, 1) == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
error:
    Py_XDECREF(name);
    Py_DECREF(attributes);
    return NULL;
}

static int status(const Reader *r, Buf *b, uint64_t *code, PyObject **message) {
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        Buf s;
        if (tag(r, b, &field, &wire) < 0) return -1;
        if (field == 2 && wire == 2) {
            PyObject *value;
            if (delimited(r, b, &s) < 0 || (value = utf8(r, &s, "status message")) == NULL) return -1;
            replace(message, value);
        } else if (field == 3 && wire == 0) {
            if (varint(r, b, code) < 0) return -1;
        } else if (skip(r, b, field, wire, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *span(const Reader *r, Buf *b, PyObject *resource, PyObject *scope, Py_ssize_t ri, Py_ssize_t si,
                      Py_ssize_t index) {
    Buf trace_id = {b->p, b->p}, span_id = trace_id, parent = trace_id, s;
    Py_ssize_t size = b->end - b->p;
    PyObject *name = NULL, *message = NULL, *events = NULL, *attributes = PyDict_New();
    uint64_t kind = 0, start = 0, end = 0, code = 0, flags = 0;
    if (attributes == NULL) return NULL;
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        if (tag(r, b, &field, &wire) < 0) goto error;
        if (wire == 2 && (field == 1 || field == 2 || field == 4)) {
            if (delimited(r, b, field == 1 ? &trace_id : field == 2 ? &span_id : &parent) < 0) goto error;
        } else if (field == 5 && wire == 2) {
            PyObject *value;
            if (delimited(r, b, &s) < 0) goto error;
            if ((value = shared_utf8(r, &s, "span name", shared_values)) == NULL) goto error;
            replace(&name, value);
        } else if (field == 6 && wire == 0) {
            if (varint(r, b, &kind) < 0) goto error;
        } else if ((field == 7 || field == 8) && wire == 1) {
            if (fixed(r, b, 8, field == 7 ? &start : &end) < 0) goto error;
        } else if (field == 9 && wire == 2) {
            if (delimited(r, b, &s) < 0 || keyvalue(r, &s, attributes, r->keys != NULL, 1) < 0) goto error;
        } else if (field == 11 && wire == 2) {
            PyObject *e;
            if (delimited(r, b, &s) < 0 || (e = event(r, &s)) == NULL) goto error;
            if (events == NULL && (events = PyList_New(0)) == NULL) {
                Py_DECREF(e);
                goto error;
            }
            int rc = PyList_Append(events, e);
            Py_DECREF(e);
            if (rc < 0) goto error;
        } else if (field == 15 && wire == 2) {
            if (delimited(r, b, &s) < 0 || status(r, &s, &code, &message) < 0) goto error;
        } else if (field == 16 && wire == 5) {
            if (fixed(r, b, 4, &flags) < 0) goto error;
        } else if (skip(r, b, field, wire, 0) < 0) {
            goto error;
        }
    }
    PyObject *out = PyStructSequence_New(&SpanType);
    if (out == NULL) goto error;
    int has_parent = parent.end > parent.p;
    PyObject *remote = !has_parent || !(flags & 0x100) ? Py_None : (flags & 0x200) ? Py_True : Py_False;
    PyObject *items[S_FIELDS] = {
        shared_hex(&trace_id),
        hex(&span_id),
        has_parent ? shared_hex(&parent) : Py_NewRef(Py_None),
        Py_NewRef(remote),
        name ? name : PyUnicode_New(0, 0),
        PyLong_FromLong((long)(int32_t)kind),
        PyLong_FromUnsignedLongLong(start),
        PyLong_FromUnsignedLongLong(end ? end : start),
        PyLong_FromLong((long)(int32_t)code),
        message ? message : PyUnicode_New(0, 0),
        attributes,
        events ? PyList_AsTuple(events) : PyTuple_New(0),
        Py_NewRef(resource),
        Py_NewRef(scope),
        PyLong_FromSsize_t(ri),
        PyLong_FromSsize_t(si),
        PyLong_FromSsize_t(index),
        PyLong_FromSsize_t(size),
    };
    Py_XDECREF(events);
    int ok = 1;
    for (int i = 0; i < S_FIELDS; i++) {
        ok &= items[i] != NULL;
        PyStructSequence_SET_ITEM(out, i, items[i]);
    }
    if (!ok) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
error:
    Py_XDECREF(name);
    Py_XDECREF(message);
    Py_XDECREF(events);
    Py_DECREF(attributes);
    return NULL;
}

/* --- the request ---------------------------------------------------------------------------------------- */
/* InstrumentationScope: its name; its version and attributes are only checked (protobuf parses them). */
static int scope(const Reader *r, Buf *b, PyObject **name) {
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        Buf s;
        PyObject *value;
        if (tag(r, b, &field, &wire) < 0) return -1;
        if ((field == 1 || field == 2) && wire == 2) {
            if (delimited(r, b, &s) < 0 || (value = utf8(r, &s, "scope name or version")) == NULL) return -1;
            if (field == 1)
                replace(name, value);
            else
                Py_DECREF(value);
        } else if (field == 3 && wire == 2) {
            PyObject *ignored = PyDict_New();
            int rc = ignored == NULL || delimited(r, b, &s) < 0 ? -1 : keyvalue(r, &s, ignored, 0, 1);
            Py_XDECREF(ignored);
            if (rc < 0) return -1;
        } else if (skip(r, b, field, wire, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

static int scope_spans(const Reader *r, Buf *b, PyObject *resource, Py_ssize_t ri, Py_ssize_t si, PyObject *out) {
    PyObject *name = PyUnicode_New(0, 0);
    Buf s, again = *b;
    if (name == NULL) return -1;
    /* The scope may follow the spans: find it first. */
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        if (tag(r, b, &field, &wire) < 0) goto error;
        if (field == 1 && wire == 2) {
            if (delimited(r, b, &s) < 0 || scope(r, &s, &name) < 0) goto error;
        } else if (skip(r, b, field, wire, 0) < 0) {
            goto error;
        }
    }
    for (Py_ssize_t index = 0; again.p < again.end;) {
        uint32_t field;
        int wire;
        if (tag(r, &again, &field, &wire) < 0) goto error;
        if (field == 2 && wire == 2) {
            PyObject *item;
            if (delimited(r, &again, &s) < 0 || (item = span(r, &s, resource, name, ri, si, index++)) == NULL)
                goto error;
            int rc = PyList_Append(out, item);
            Py_DECREF(item);
            if (rc < 0) goto error;
        } else if (skip(r, &again, field, wire, 0) < 0) {
            goto error;
        }
    }
    Py_DECREF(name);
    return 0;
error:
    Py_DECREF(name);
    return -1;
}

static int resource_spans(const Reader *r, Buf *b, Py_ssize_t ri, PyObject *out) {
    PyObject *resource = PyDict_New();
    Buf s, again = *b;
    if (resource == NULL) return -1;
    /* Resource (field 1, its attributes in field 1) may follow the scope spans: read it first. */
    while (b->p < b->end) {
        uint32_t field;
        int wire;
        if (tag(r, b, &field, &wire) < 0) goto error;
        if (field == 1 && wire == 2) {
            if (delimited(r, b, &s) < 0 || keyvalues(r, &s, resource, 0, 1) < 0) goto error;
        } else if (skip(r, b, field, wire, 0) < 0) {
            goto error;
        }
    }
    for (Py_ssize_t si = 0; again.p < again.end;) {
        uint32_t field;
        int wire;
        if (tag(r, &again, &field, &wire) < 0) goto error;
        if (field == 2 && wire == 2) {
            if (delimited(r, &again, &s) < 0 || scope_spans(r, &s, resource, ri, si++, out) < 0) goto error;
        } else if (skip(r, &again, field, wire, 0) < 0) {
            goto error;
        }
    }
    Py_DECREF(resource);
    return 0;
error:
    Py_DECREF(resource);
    return -1;
}

static int reader(Reader *r, const uint8_t *base, PyObject *keys, PyObject *prefixes) {
    memset(r, 0, sizeof *r);
    r->base = base;
    if (keys == Py_None) return 0;
    if (!PyAnySet_Check(keys) || !PyTuple_Check(prefixes)) {
        PyErr_SetString(PyExc_TypeError, "keys must be a set or frozenset (or None), prefixes a tuple of str");
        return -1;
    }
    r->keys = keys;
    r->n_prefixes = PyTuple_GET_SIZE(prefixes);
    r->prefixes = PyMem_Calloc(r->n_prefixes + 1, sizeof(char *));
    r->prefix_lens = PyMem_Calloc(r->n_prefixes + 1, sizeof(Py_ssize_t));
    if (r->prefixes == NULL || r->prefix_lens == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < r->n_prefixes; i++) {
        r->prefixes[i] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(prefixes, i), &r->prefix_lens[i]);
        if (r->prefixes[i] == NULL) return -1;
    }
    return 0;
}

static void reader_free(Reader *r) {
    PyMem_Free(r->prefixes);
    PyMem_Free(r->prefix_lens);
}

static PyObject *read_request(PyObject *module, PyObject *args) {
    Py_buffer body;
    PyObject *keys = Py_None, *prefixes = NULL, *out = NULL;
    Reader r = {0};
    if (!PyArg_ParseTuple(args, "y*|OO!:read_request", &body, &keys, &PyTuple_Type, &prefixes)) return NULL;
    if (prefixes == NULL) prefixes = PyTuple_New(0); else Py_INCREF(prefixes);
    if (prefixes == NULL || reader(&r, body.buf, keys, prefixes) < 0) goto done;
    out = PyList_New(0);
    Buf b = {body.buf, (const uint8_t *)body.buf + body.len}, s;
    for (Py_ssize_t ri = 0; out != NULL && b.p < b.end;) {
        uint32_t field;
        int wire;
        if (tag(&r, &b, &field, &wire) < 0) {
            Py_CLEAR(out);
        } else if (field == 1 && wire == 2) {
            if (delimited(&r, &b, &s) < 0 || resource_spans(&r, &s, ri++, out) < 0) Py_CLEAR(out);
        } else if (skip(&r, &b, field, wire, 0) < 0) {
            Py_CLEAR(out);
        }
    }
done:
    reader_free(&r);
    Py_XDECREF(prefixes);
    PyBuffer_Release(&body);
    return out;
}

static PyObject *read_span(PyObject *module, PyObject *args) {
    Py_buffer body;
    PyObject *resource, *scope_name;
    if (!PyArg_ParseTuple(args, "y*O!U:read_span", &body, &PyDict_Type, &resource, &scope_name)) return NULL;
    Reader r;
    memset(&r, 0, sizeof r);
    r.base = body.buf;
    Buf b = {body.buf, (const uint8_t *)body.buf + body.len};
    PyObject *out = span(&r, &b, resource, scope_name, 0, 0, 0);
    PyBuffer_Release(&body);
    return out;
}

/* --- checking a request against the OTLP schema ------------------------------------------------------ */
/* Before a request is acknowledged every field of it is checked as the OTLP protobuf schema and the
 * Collector's decoder require, the fields grading reads and the ones it only forwards alike: each known field
 * has its declared wire type, strings are UTF-8, trace ids are 16 bytes and span ids 8 (a parent span id 0 or
 * 8), messages nest at most MAX_MESSAGE_DEPTH deep below the request (protobuf's own limit), and unknown
 * fields are well-formed. A request that passes is one every hop downstream parses; one that does not is
 * refused whole, with the path of the field at fault, so it can never be merged with other clients' spans
 * and refused with them. */
enum { F_VARINT, F_FIXED64, F_FIXED32, F_STRING, F_BYTES, F_MESSAGE };

typedef struct MessageDef MessageDef;
typedef struct {
    uint32_t number;
    uint8_t type;
    uint8_t repeated;
    uint8_t id_size;      /* F_BYTES: the required length of an id, 0 for any length */
    uint8_t may_be_empty; /* an id that may be absent (a parent span id) */
    const char *name;
    const MessageDef *message;
} FieldDef;
struct MessageDef {
    const FieldDef *fields;
    int n;
    int is_span; /* counted */
};

#define FIELDS(x) x, (int)(sizeof x / sizeof x[0])
static const MessageDef ANY_VALUE, KEY_VALUE;
static const FieldDef array_value_f[] = {{1, F_MESSAGE, 1, 0, 0, "values", &ANY_VALUE}};
static const MessageDef ARRAY_VALUE = {FIELDS(array_value_f), 0};
static const FieldDef kvlist_f[] = {{1, F_MESSAGE, 1, 0, 0, "values", &KEY_VALUE}};
static const MessageDef KVLIST = {FIELDS(kvlist_f), 0};
static const FieldDef any_value_f[] = {
    {1, F_STRING, 0, 0, 0, "string_value", NULL},    {2, F_VARINT, 0, 0, 0, "bool_value", NULL},
    {3, F_VARINT, 0, 0, 0, "int_value", NULL},       {4, F_FIXED64, 0, 0, 0, "double_value", NULL},
    {5, F_MESSAGE, 0, 0, 0, "array_value", &ARRAY_VALUE}, {6, F_MESSAGE, 0, 0, 0, "kvlist_value", &KVLIST},
    {7, F_BYTES, 0, 0, 0, "bytes_value", NULL},
};
static const MessageDef ANY_VALUE = {FIELDS(any_value_f), 0};
static const FieldDef key_value_f[] = {
    {1, F_STRING, 0, 0, 0, "key", NULL}, {2, F_MESSAGE, 0, 0, 0, "value", &ANY_VALUE}};
static const MessageDef KEY_VALUE = {FIELDS(key_value_f), 0};
static const FieldDef entity_ref_f[] = {
    {1, F_STRING, 0, 0, 0, "schema_url", NULL}, {2, F_STRING, 0, 0, 0, "type", NULL},
    {3, F_STRING, 1, 0, 0, "id_keys", NULL},    {4, F_STRING, 1, 0, 0, "description_keys", NULL}};
static const MessageDef ENTITY_REF = {FIELDS(entity_ref_f), 0};
static const FieldDef resource_f[] = {
    {1, F_MESSAGE, 1, 0, 0, "attributes", &KEY_VALUE}, {2, F_VARINT, 0, 0, 0, "dropped_attributes_count", NULL},
    {3, F_MESSAGE, 1, 0, 0, "entity_refs", &ENTITY_REF}};
static const MessageDef RESOURCE = {FIELDS(resource_f), 0};
static const FieldDef scope_f[] = {
    {1, F_STRING, 0, 0, 0, "name", NULL}, {2, F_STRING, 0, 0, 0, "version", NULL},
    {3, F_MESSAGE, 1, 0, 0, "attributes", &KEY_VALUE}, {4, F_VARINT, 0, 0, 0, "dropped_attributes_count", NULL}};
static const MessageDef SCOPE = {FIELDS(scope_f), 0};
static const FieldDef event_f[] = {
    {1, F_FIXED64, 0, 0, 0, "time_unix_nano", NULL}, {2, F_STRING, 0, 0, 0, "name", NULL},
    {3, F_MESSAGE, 1, 0, 0, "attributes", &KEY_VALUE}, {4, F_VARINT, 0, 0, 0, "dropped_attributes_count", NULL}};
static const MessageDef EVENT = {FIELDS(event_f), 0};
static const FieldDef link_f[] = {
    {1, F_BYTES, 0, 16, 0, "trace_id", NULL},       {2, F_BYTES, 0, 8, 0, "span_id", NULL},
    {3, F_STRING, 0, 0, 0, "trace_state", NULL},    {4, F_MESSAGE, 1, 0, 0, "attributes", &KEY_VALUE},
    {5, F_VARINT, 0, 0, 0, "dropped_attributes_count", NULL}, {6, F_FIXED32, 0, 0, 0, "flags", NULL}};
static const MessageDef LINK = {FIELDS(link_f), 0};
static const FieldDef status_f[] = {{2, F_STRING, 0, 0, 0, "message", NULL}, {3, F_VARINT, 0, 0, 0, "code", NULL}};
static const MessageDef STATUS = {FIELDS(status_f), 0};
static const FieldDef span_f[] = {
    {1, F_BYTES, 0, 16, 0, "trace_id", NULL},
    {2, F_BYTES, 0, 8, 0, "span_id", NULL},
    {3, F_STRING, 0, 0, 0, "trace_state", NULL},
    {4, F_BYTES, 0, 8, 1, "parent_span_id", NULL},
    {5, F_STRING, 0, 0, 0, "name", NULL},
    {6, F_VARINT, 0, 0, 0, "kind", NULL},
    {7, F_FIXED64, 0, 0, 0, "start_time_unix_nano", NULL},
    {8, F_FIXED64, 0, 0, 0, "end_time_unix_nano", NULL},
    {9, F_MESSAGE, 1, 0, 0, "attributes", &KEY_VALUE},
    {10, F_VARINT, 0, 0, 0, "dropped_attributes_count", NULL},
    {11, F_MESSAGE, 1, 0, 0, "events", &EVENT},
    {12, F_VARINT, 0, 0, 0, "dropped_events_count", NULL},
    {13, F_MESSAGE, 1, 0, 0, "links", &LINK},
    {14, F_VARINT, 0, 0, 0, "dropped_links_count", NULL},
    {15, F_MESSAGE, 0, 0, 0, "status", &STATUS},
    {16, F_FIXED32, 0, 0, 0, "flags", NULL},
};
static const MessageDef SPAN = {FIELDS(span_f), 1};
static const FieldDef scope_spans_f[] = {
    {1, F_MESSAGE, 0, 0, 0, "scope", &SCOPE}, {2, F_MESSAGE, 1, 0, 0, "spans", &SPAN},
    {3, F_STRING, 0, 0, 0, "schema_url", NULL}};
static const MessageDef SCOPE_SPANS = {FIELDS(scope_spans_f), 0};
static const FieldDef resource_spans_f[] = {
    {1, F_MESSAGE, 0, 0, 0, "resource", &RESOURCE}, {2, F_MESSAGE, 1, 0, 0, "scope_spans", &SCOPE_SPANS},
    {3, F_STRING, 0, 0, 0, "schema_url", NULL}};
static const MessageDef RESOURCE_SPANS = {FIELDS(resource_spans_f), 0};
static const FieldDef request_f[] = {{1, F_MESSAGE, 1, 0, 0, "resource_spans", &RESOURCE_SPANS}};
static const MessageDef REQUEST = {FIELDS(request_f), 0};
#define MAX_FIELDS 16

static const int WIRE_OF[] = {[F_VARINT] = 0, [F_FIXED64] = 1, [F_FIXED32] = 5, [F_STRING] = 2, [F_BYTES] = 2,
                              [F_MESSAGE] = 2};

typedef struct {
    const FieldDef *field;
    Py_ssize_t index; /* of a repeated field's occurrence, or -1 */
} Step;

typedef struct {
    Reader r;
    Py_ssize_t spans;
    int depth;
    Step path[MAX_MESSAGE_DEPTH + 2];
} Checker;

/* Strict UTF-8 as protobuf requires: no overlong forms, no surrogates, nothing past U+10FFFF. */
static const uint8_t *invalid_utf8(const uint8_t *p, const uint8_t *end) {
    while (p < end) {
        uint8_t c = *p;
        if (c < 0x80) {
            uint64_t word;
            while (end - p >= 8) { /* ASCII eight bytes at a time */
                memcpy(&word, p, 8);
                if (word & 0x8080808080808080ULL) break;
                p += 8;
            }
            if (p < end && *p < 0x80) p++;
            continue;
        }
        int n;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) n = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) n = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) n = 3, cp = c & 0x07;
        else return p;
        if (end - p <= n) return p;
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80) return p;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return p;
        p += n + 1;
    }
    return NULL;
}

static int check_message(Checker *c, Buf *b, const MessageDef *m);

static int check_field(Checker *c, Buf *b, const FieldDef *f, int wire) {
    uint64_t ignored;
    Buf s;
    const uint8_t *at = b->p;
    if (wire != WIRE_OF[f->type]) return fail(&c->r, at, "wrong wire type");
    switch (f->type) {
    case F_VARINT: return varint(&c->r, b, &ignored);
    case F_FIXED64: return fixed(&c->r, b, 8, &ignored);
    case F_FIXED32: return fixed(&c->r, b, 4, &ignored);
    default: break;
    }
    if (delimited(&c->r, b, &s) < 0) return -1;
    Py_ssize_t n = s.end - s.p;
    if (f->type == F_STRING) {
        const uint8_t *bad = invalid_utf8(s.p, s.end);
        return bad ? fail(&c->r, bad, "not valid UTF-8") : 0;
    }
    if (f->type == F_BYTES) {
        if (f->id_size && n != f->id_size && !(n == 0 && f->may_be_empty)) {
            if (c->r.quiet) return -1;
            PyErr_Format(PyExc_ValueError, "%zd bytes where an id has %d, at byte %zd", n, f->id_size,
                         (Py_ssize_t)(s.p - c->r.base));
            return -1;
        }
        return 0;
    }
    if (c->depth >= MAX_MESSAGE_DEPTH) return fail(&c->r, s.p, "messages nested more than 100 deep");
    c->depth++;
    if (check_message(c, &s, f->message) < 0) return -1; /* the path stays as it is, for the message */
    c->depth--;
    return 0;
}

static int check_message(Checker *c, Buf *b, const MessageDef *m) {
    /* The path to the field at fault is kept only when a failure is to be named (not quiet). */
    const int quiet = c->r.quiet;
    Py_ssize_t counts[MAX_FIELDS];
    if (!quiet) memset(counts, 0, sizeof counts);
    uint32_t seen_ids = 0; /* ids that must be present, by field index */
    if (m->is_span) c->spans++;
    while (b->p < b->end) {
        uint32_t number;
        int wire;
        if (!quiet) c->path[c->depth].field = NULL; /* a failure before a field is known is the message's */
        if (tag(&c->r, b, &number, &wire) < 0) return -1;
        if (wire > 5) return fail(&c->r, b->p - 1, "invalid wire type");
        const FieldDef *f = NULL;
        int i = (int)number - 1; /* the fields of most messages are numbered 1, 2, 3... in order */
        if (number <= (uint32_t)m->n && m->fields[i].number == number) {
            f = &m->fields[i];
        } else {
            for (i = 0; i < m->n; i++)
                if (m->fields[i].number == number) {
                    f = &m->fields[i];
                    break;
                }
        }
        if (f == NULL) {
            if (skip(&c->r, b, number, wire, 0) < 0) return -1;
            continue;
        }
        if (!quiet) c->path[c->depth] = (Step){f, f->repeated ? counts[i]++ : -1};
        if (check_field(c, b, f, wire) < 0) {
            if (!quiet) c->path[c->depth + 1].field = NULL; /* the path ends at this field */
            return -1;
        }
        if (f->id_size) seen_ids |= 1u << i;
    }
    for (int i = 0; i < m->n; i++)
        if (m->fields[i].id_size && !m->fields[i].may_be_empty && !(seen_ids & (1u << i))) {
            if (quiet) return -1;
            c->path[c->depth] = (Step){&m->fields[i], -1};
            c->path[c->depth + 1].field = NULL;
            PyErr_Format(PyExc_ValueError, "missing (an id has %d bytes)", m->fields[i].id_size);
            return -1;
        }
    return 0;
}

/* The failing field's path before the error's own message: "resource_spans[0].scope_spans[1].spans[3].name: ...". */
static void name_the_field(Checker *c) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *path = PyUnicode_New(0, 0);
    for (int d = 0; path != NULL && d <= MAX_MESSAGE_DEPTH && c->path[d].field != NULL; d++) {
        PyObject *part = c->path[d].index < 0
                             ? PyUnicode_FromFormat("%s%s", d ? "." : "", c->path[d].field->name)
                             : PyUnicode_FromFormat("%s%s[%zd]", d ? "." : "", c->path[d].field->name,
                                                    c->path[d].index);
        PyObject *longer = part ? PyUnicode_Concat(path, part) : NULL;
        Py_XDECREF(part);
        Py_SETREF(path, longer);
    }
    PyObject *message = value ? PyObject_Str(value) : NULL;
    if (path != NULL && message != NULL && PyUnicode_GET_LENGTH(path)) {
        PyErr_Format(PyExc_ValueError, "%U: %U", path, message);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
    } else {
        PyErr_Restore(type, value, traceback);
    }
    Py_XDECREF(path);
    Py_XDECREF(message);
}

/* A request's bytes are checked without the interpreter's lock (a bytes object cannot change meanwhile), so that
 * the sidecar's other threads run while it is: a request found malformed is checked again with the lock, to
 * name the field at fault. */
static int check_whole(Checker *c, const Py_buffer *body, int quiet) {
    memset(c, 0, sizeof *c);
    c->r.base = body->buf;
    c->r.quiet = quiet;
    Buf b = {body->buf, (const uint8_t *)body->buf + body->len};
    if (!quiet) return check_message(c, &b, &REQUEST);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = check_message(c, &b, &REQUEST);
    Py_END_ALLOW_THREADS
    return rc;
}

static PyObject *check_request(PyObject *module, PyObject *args) {
    PyObject *obj;
    Py_buffer body;
    if (!PyArg_ParseTuple(args, "O:check_request", &obj) || PyObject_GetBuffer(obj, &body, PyBUF_SIMPLE) < 0)
        return NULL;
    Checker *c = PyMem_Malloc(sizeof *c);
    if (c == NULL) {
        PyBuffer_Release(&body);
        return PyErr_NoMemory();
    }
    PyObject *out = NULL;
    if ((PyBytes_CheckExact(obj) && check_whole(c, &body, 1) == 0) || check_whole(c, &body, 0) == 0)
        out = PyLong_FromSsize_t(c->spans);
    else
        name_the_field(c);
    PyMem_Free(c);
    PyBuffer_Release(&body);
    return out;
}

/* --- encoding result fields ---------------------------------------------------------------------------- */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Out;

static int put(Out *o, const void *bytes, Py_ssize_t n) {
    if (o->len + n > o->cap) {
        Py_ssize_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n) cap *= 2;
        char *data = PyMem_Realloc(o->data, cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->data = data;
        o->cap = cap;
    }
    memcpy(o->data + o->len, bytes, n);
    o->len += n;
    return 0;
}

static int varint_size(uint64_t v) {
    int n = 1;
    while (v > 0x7f) v >>= 7, n++;
    return n;
}

static void put_varint_at(char *at, uint64_t v) {
    do {
        *at++ = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static int put_varint(Out *o, uint64_t v) {
    char bytes[10];
    put_varint_at(bytes, v);
    return put(o, bytes, varint_size(v));
}

static int put_fixed64(Out *o, uint32_t field, uint64_t v) {
    uint8_t bytes[8];
    for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(v >> (8 * i));
    return put_varint(o, field << 3 | 1) < 0 ? -1 : put(o, bytes, 8);
}

static int put_fixed32(Out *o, uint32_t field, uint32_t v) {
    uint8_t bytes[4];
    for (int i = 0; i < 4; i++) bytes[i] = (uint8_t)(v >> (8 * i));
    return put_varint(o, field << 3 | 5) < 0 ? -1 : put(o, bytes, 4);
}

static int put_delimited(Out *o, uint32_t field, const char *bytes, Py_ssize_t n) {
    if (put_varint(o, field << 3 | 2) < 0 || put_varint(o, (uint64_t)n) < 0) return -1;
    return put(o, bytes, n);
}

static int put_string(Out *o, uint32_t field, PyObject *text) {
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    return utf8 == NULL ? -1 : put_delimited(o, field, utf8, n);
}

/* A nested message: encoded on its own, then written with its length. */
static int put_message(Out *o, uint32_t field, Out *inner) {
    int rc = put_delimited(o, field, inner->data ? inner->data : "", inner->len);
    PyMem_Free(inner->data);
    inner->data = NULL;
    return rc;
}

/* An AnyValue as protobuf's Python API sets one from a value (trajgrade.core.emit's result values). */
static int put_anyvalue(Out *o, PyObject *value, int depth) {
    if (depth > MAX_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "result value nested too deep");
        return -1;
    }
    if (PyBool_Check(value)) return put_varint(o, 2 << 3) < 0 ? -1 : put_varint(o, value == Py_True);
    if (PyLong_Check(value)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) {
            PyErr_Format(PyExc_ValueError, "Value out of range: %R", value);
            return -1;
        }
        if (v == -1 && PyErr_Occurred()) return -1;
        return put_varint(o, 3 << 3) < 0 ? -1 : put_varint(o, (uint64_t)v);
    }
    if (PyFloat_Check(value)) {
        double d = PyFloat_AS_DOUBLE(value);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return put_fixed64(o, 4, bits);
    }
    if (PyUnicode_Check(value)) return put_string(o, 1, value);
    if (PyBytes_Check(value)) return put_delimited(o, 7, PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
    if (PyList_Check(value) || PyTuple_Check(value)) {
        Out array = {0};
        PyObject *items = PySequence_Fast(value, "");
        if (items == NULL) return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); i++) {
            Out item = {0};
            if (put_anyvalue(&item, PySequence_Fast_GET_ITEM(items, i), depth + 1) < 0 ||
                put_message(&array, 1, &item) < 0) {
                PyMem_Free(item.data);
                PyMem_Free(array.data);
                Py_DECREF(items);
                return -1;
            }
        }
        Py_DECREF(items);
        return put_message(o, 5, &array);
    }
    PyObject *text = PyObject_Str(value);
    if (text == NULL) return -1;
    int rc = put_string(o, 1, text);
    Py_DECREF(text);
    return rc;
}

/* KeyValue entries (field ``field`` of the enclosing message), one per item of a dict. */
static int put_attributes(Out *o, uint32_t field, PyObject *attributes) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    if (!PyDict_Check(attributes)) {
        PyErr_SetString(PyExc_TypeError, "attributes must be a dict");
        return -1;
    }
    while (PyDict_Next(attributes, &pos, &key, &value)) {
        Out kv = {0}, any = {0};
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "attribute keys must be str");
            return -1;
        }
        if ((PyUnicode_GET_LENGTH(key) && put_string(&kv, 1, key) < 0) || put_anyvalue(&any, value, 0) < 0 ||
            put_message(&kv, 2, &any) < 0 || put_message(o, field, &kv) < 0) {
            PyMem_Free(any.data);
            PyMem_Free(kv.data);
            return -1;
        }
    }
    return 0;
}

static PyObject *encode_result_fields(PyObject *module, PyObject *args) {
    PyObject *events, *attributes, *name;
    unsigned long long time;
    if (!PyArg_ParseTuple(args, "O!O!KU:encode_result_fields", &PyList_Type, &events, &PyDict_Type, &attributes, &time,
                          &name))
        return NULL;
    Out o = {0};
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        Out event = {0};
        if ((time && put_fixed64(&event, 1, time) < 0) ||
            (PyUnicode_GET_LENGTH(name) && put_string(&event, 2, name) < 0) ||
            put_attributes(&event, 3, PyList_GET_ITEM(events, i)) < 0 || put_message(&o, 11, &event) < 0) {
            PyMem_Free(event.data);
            PyMem_Free(o.data);
            return NULL;
        }
    }
    if (put_attributes(&o, 9, attributes) < 0) {
        PyMem_Free(o.data);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(o.data ? o.data : "", o.len);
    PyMem_Free(o.data);
    return out;
}

/* A LogRecord (ScopeLogs.log_records, field 2) as the SDK's OTLP encoder writes the record its Logger.emit makes:
 * an empty body, the attributes, the span context's flags, trace and span ids, the time it was observed and the
 * event's name; each left out when zero or empty, as protobuf leaves out a default. */
static PyObject *encode_log_record(PyObject *module, PyObject *args) {
    PyObject *attributes;
    const char *trace, *span, *name;
    Py_ssize_t trace_n, span_n, name_n;
    unsigned int flags;
    unsigned long long observed;
    if (!PyArg_ParseTuple(args, "O!y#y#IKs#:encode_log_record", &PyDict_Type, &attributes, &trace, &trace_n, &span,
                          &span_n, &flags, &observed, &name, &name_n))
        return NULL;
    static const char empty_body[] = {5 << 3 | 2, 0};
    Out record = {0}, o = {0};
    if (put(&record, empty_body, 2) < 0 || put_attributes(&record, 6, attributes) < 0 ||
        (flags && put_fixed32(&record, 8, flags) < 0) || (trace_n && put_delimited(&record, 9, trace, trace_n) < 0) ||
        (span_n && put_delimited(&record, 10, span, span_n) < 0) ||
        (observed && put_fixed64(&record, 11, observed) < 0) ||
        (name_n && put_delimited(&record, 12, name, name_n) < 0) || put_message(&o, 2, &record) < 0) {
        PyMem_Free(record.data);
        PyMem_Free(o.data);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(o.data ? o.data : "", o.len);
    PyMem_Free(o.data);
    return out;
}

static PyObject *encode_attributes(PyObject *module, PyObject *args) {
    PyObject *attributes;
    unsigned int field;
    if (!PyArg_ParseTuple(args, "O!I:encode_attributes", &PyDict_Type, &attributes, &field)) return NULL;
    if (field == 0 || field > 536870911u) {
        PyErr_SetString(PyExc_ValueError, "field must be a protobuf field number");
        return NULL;
    }
    Out o = {0};
    if (put_attributes(&o, field, attributes) < 0) {
        PyMem_Free(o.data);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(o.data ? o.data : "", o.len);
    PyMem_Free(o.data);
    return out;
}

/* --- taking spans out of a request ------------------------------------------------------------------- */
/* A span taken out of a request, by its place as read_request numbers it, with what a request of it alone needs:
 * its ResourceSpans' resource and schema_url fields and its ScopeSpans' scope and schema_url fields, as they
 * came. */
typedef struct {
    Py_ssize_t ri, si, index;
    Buf span;
    Out resource, scope;
} Taken;

/* The request without the spans taken, written once into a buffer of the request's size: it is never longer. A
 * message that loses spans keeps the length prefix's size it had (a shorter length needs no more bytes), moved up
 * when its new length needs fewer. */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Rest;

static int rest_too_long(void) {
    PyErr_SetString(PyExc_ValueError, "a request without some of its spans came out longer than it was");
    return -1;
}

static int rest_put(Rest *w, const uint8_t *p, Py_ssize_t n) {
    if (n > w->cap - w->len) return rest_too_long();
    memcpy(w->data + w->len, p, n);
    w->len += n;
    return 0;
}

/* Opens field `field` (a message that was `was` bytes long) in w: its tag, room for its length; the mark to close. */
static int rest_open(Rest *w, uint32_t field, Py_ssize_t was, Py_ssize_t *mark) {
    char tag_bytes[10];
    put_varint_at(tag_bytes, field << 3 | 2);
    if (rest_put(w, (const uint8_t *)tag_bytes, varint_size(field << 3 | 2)) < 0) return -1;
    int room = varint_size((uint64_t)was);
    if (room > w->cap - w->len) return rest_too_long();
    *mark = w->len;
    w->len += room;
    return 0;
}

static void rest_close(Rest *w, Py_ssize_t mark, Py_ssize_t was) {
    int room = varint_size((uint64_t)was);
    Py_ssize_t len = w->len - mark - room;
    int n = varint_size((uint64_t)len);
    if (n < room) {
        memmove(w->data + mark + n, w->data + mark + room, len);
        w->len -= room - n;
    }
    put_varint_at(w->data + mark, (uint64_t)len);
}

/* The next field of b: its number and wire type, its bytes whole (raw, from its tag) and a length-delimited
 * field's payload. */
static int next_field(const Reader *r, Buf *b, uint32_t *field, int *wire, Buf *raw, Buf *payload) {
    raw->p = b->p;
    if (tag(r, b, field, wire) < 0) return -1;
    if (*wire == 2 ? delimited(r, b, payload) < 0 : skip(r, b, *field, *wire, 0) < 0) return -1;
    raw->end = b->p;
    return 0;
}

static int takes_from(const Taken *t, Py_ssize_t n, Py_ssize_t ri, Py_ssize_t si) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (t[i].ri == ri && (si < 0 || t[i].si == si)) return 1;
    return 0;
}

/* The fields of a ResourceSpans (si < 0), its ScopeSpans that lose spans written anew, or of one of its ScopeSpans,
 * without the spans taken from it; each span taken gets the message's resource (or scope) and schema_url fields. */
static int splice_message(const Reader *r, Buf b, Py_ssize_t ri, Py_ssize_t si, Taken *t, Py_ssize_t n, Rest *w) {
    Out kept = {0};
    Py_ssize_t count = 0, mark;
    int rc = -1;
    while (b.p < b.end) {
        uint32_t field;
        int wire;
        Buf raw, payload;
        if (next_field(r, &b, &field, &wire, &raw, &payload) < 0) goto done;
        if (field == 2 && wire == 2) {
            Py_ssize_t here = count++, was = payload.end - payload.p, i = 0;
            if (si < 0 && takes_from(t, n, ri, here)) {
                if (rest_open(w, 2, was, &mark) < 0 || splice_message(r, payload, ri, here, t, n, w) < 0) goto done;
                rest_close(w, mark, was);
                continue;
            }
            while (si >= 0 && i < n && !(t[i].ri == ri && t[i].si == si && t[i].index == here)) i++;
            if (si >= 0 && i < n) {
                t[i].span = payload;
                continue;
            }
        } else if ((field == 1 || field == 3) && wire == 2 && put(&kept, raw.p, raw.end - raw.p) < 0) {
            goto done;
        }
        if (rest_put(w, raw.p, raw.end - raw.p) < 0) goto done;
    }
    for (Py_ssize_t i = 0; i < n && kept.len; i++)
        if (t[i].ri == ri && (si < 0 || t[i].si == si) && put(si < 0 ? &t[i].resource : &t[i].scope, kept.data,
                                                                kept.len) < 0)
            goto done;
    rc = 0;
done:
    PyMem_Free(kept.data);
    return rc;
}

static PyObject *splice_spans(PyObject *module, PyObject *args) {
    Py_buffer body;
    PyObject *places, *seq = NULL, *rest = NULL, *taken = NULL, *out = NULL;
    if (!PyArg_ParseTuple(args, "y*O:splice_spans", &body, &places)) return NULL;
    Taken *t = NULL;
    Py_ssize_t n = 0, ri = 0, mark;
    if ((seq = PySequence_Fast(places, "places must be a sequence of (resource, scope, span) indices")) == NULL)
        goto done;
    n = PySequence_Fast_GET_SIZE(seq);
    if ((t = PyMem_Calloc(n ? n : 1, sizeof *t)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "nnn", &t[i].ri, &t[i].si, &t[i].index)) goto done;
    if ((rest = PyBytes_FromStringAndSize(NULL, body.len)) == NULL) goto done;
    Rest w = {PyBytes_AS_STRING(rest), 0, body.len};
    Reader r = {.base = body.buf};
    Buf b = {body.buf, (const uint8_t *)body.buf + body.len};
    while (b.p < b.end) {
        uint32_t field;
        int wire;
        Buf raw, payload;
        if (next_field(&r, &b, &field, &wire, &raw, &payload) < 0) goto done;
        if (field == 1 && wire == 2) {
            Py_ssize_t here = ri++, was = payload.end - payload.p;
            if (takes_from(t, n, here, -1)) {
                if (rest_open(&w, 1, was, &mark) < 0 || splice_message(&r, payload, here, -1, t, n, &w) < 0) goto done;
                rest_close(&w, mark, was);
                continue;
            }
        }
        if (rest_put(&w, raw.p, raw.end - raw.p) < 0) goto done;
    }
    if (_PyBytes_Resize(&rest, w.len) < 0) goto done; /* frees rest on failure */
    if ((taken = PyList_New(n)) == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i].span.p == NULL) {
            PyErr_Format(PyExc_ValueError, "no span at resource_spans[%zd].scope_spans[%zd].spans[%zd]", t[i].ri,
                         t[i].si, t[i].index);
            goto done;
        }
        PyObject *item = Py_BuildValue("(y#y#y#)", (const char *)t[i].span.p, (Py_ssize_t)(t[i].span.end - t[i].span.p),
                                       t[i].resource.data ? t[i].resource.data : "", t[i].resource.len,
                                       t[i].scope.data ? t[i].scope.data : "", t[i].scope.len);
        if (item == NULL) goto done;
        PyList_SET_ITEM(taken, i, item);
    }
    out = PyTuple_Pack(2, rest, taken);
done:
    Py_XDECREF(rest);
    Py_XDECREF(taken);
    Py_XDECREF(seq);
    for (Py_ssize_t i = 0; t != NULL && i < n; i++) {
        PyMem_Free(t[i].resource.data);
        PyMem_Free(t[i].scope.data);
    }
    PyMem_Free(t);
    PyBuffer_Release(&body);
    return out;
}

static PyMethodDef methods[] = {
    {"read_request", read_request, METH_VARARGS,
     "read_request(body, keys=None, prefixes=()) -> list[Span]\n\n"
     "Every span of a binary ExportTraceServiceRequest. With keys, a span keeps only the attributes whose key\n"
     "is in keys or starts with one of prefixes. Raises ValueError on malformed bytes."},
    {"splice_spans", splice_spans, METH_VARARGS,
     "splice_spans(body, places) -> tuple[bytes, list[tuple[bytes, bytes, bytes]]]\n\n"
     "Take the spans at places ((resource_index, scope_index, index) as read_request numbers them) out of a binary\n"
     "ExportTraceServiceRequest: the request without them, every other field as it came, and for each span its\n"
     "bytes, its ResourceSpans' resource and schema_url fields and its ScopeSpans' scope and schema_url fields\n"
     "(what a request of that span alone is made of). Raises ValueError on malformed bytes or a place with no span."},
    {"check_request", check_request, METH_VARARGS,
     "check_request(body) -> int\n\n"
     "The number of spans in a binary ExportTraceServiceRequest, once every field of it was checked against the\n"
     "OTLP schema: wire types, UTF-8 strings, id lengths, nesting. Raises ValueError naming the field's path."},
    {"read_span", read_span, METH_VARARGS,
     "read_span(span, resource_attributes, scope_name) -> Span\n\nOne binary Span, with all its attributes."},
    {"encode_result_fields", encode_result_fields, METH_VARARGS,
     "encode_result_fields(events, attributes, time_unix_nano, event_name) -> bytes\n\n"
     "Span fields: one event named event_name at time_unix_nano per dict of attributes in events, then the\n"
     "attributes. Values as protobuf's Python API sets an AnyValue: bool, int, float, str, list or tuple of\n"
     "those, anything else as its str()."},
    {"encode_log_record", encode_log_record, METH_VARARGS,
     "encode_log_record(attributes, trace_id, span_id, flags, observed_unix_nano, event_name) -> bytes\n\n"
     "One LogRecord as a ScopeLogs.log_records field (2): an empty body, the attributes (values as\n"
     "encode_result_fields encodes them), the flags, the ids (16 and 8 bytes, or empty for none), the time it was\n"
     "observed and the event's name; a zero or empty one is left out, as protobuf leaves out a default."},
    {"encode_attributes", encode_attributes, METH_VARARGS,
     "encode_attributes(attributes, field) -> bytes\n\n"
     "One KeyValue per item of attributes, each as field number field of the enclosing message; values as\n"
     "encode_result_fields encodes them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_protowire", NULL, -1, methods};

PyMODINIT_FUNC PyInit__protowire(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyStructSequence_InitType2(&SpanType, &span_desc) < 0 ||
        PyStructSequence_InitType2(&EventType, &event_desc) < 0 ||
        PyModule_AddObjectRef(m, "Span", (PyObject *)&SpanType) < 0 ||
        PyModule_AddObjectRef(m, "Event", (PyObject *)&EventType) < 0 ||
        PyModule_AddIntConstant(m, "MAX_MESSAGE_DEPTH", MAX_MESSAGE_DEPTH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
