/*
 * ocx2-container-proxy-c [FUSE SIDE COMMAND ...]: the container proxy (docs/containers.md
 * section 10), the first process the bubblewrap deployer starts in every container. A static C
 * program, not Node: it is on every container's path from the request to the id, and in every
 * container's memory for as long as it runs (Node took about 60 ms to start and 46 MiB resident;
 * this takes about a millisecond and a few hundred KiB; docs/architecture.md has the figures).
 *
 * It reads no environment: what it starts is the launch file the deployer binds read-only at
 * /.proxy/launch.json (src/containers/proxy/Launch.ts has its form). It listens on port 14979 of
 * the container and accepts exactly one WebSocket (RFC 6455, as the server):
 *
 * - the begin scope (tag 1): Begun with the declaration, the secrets channels (Fed), the
 *   program's asks as channels (tags 16 to 255) with Active and Inactive around them, and the
 *   program's end (its error first when it failed);
 * - a mount scope (tag 2): handed with every later frame of that scope to the FUSE side, the
 *   Node program of the kit (bin/ocx2-container-proxy.ts), started the first time a mount is
 *   asked for, with the command this program was given as its arguments. The FUSE side gets
 *   the frames on its descriptor 3 as [length u32 BE][frame], and sends its own the same way,
 *   which are sent on as they came. A container with no FUSE mount never starts Node.
 * - a tree scope (tag 3) and any other: 0x06 + why, and the finish.
 *
 * The program's API is HTTP on 127.0.0.1:14978 (GET /begin, GET /secrets, PUT or POST
 * /rotating, POST /ask/TAG), each answered and the connection closed after its answer.
 *
 * Built by bin/fusemountfd.mjs with `gcc -static` into dist/ocx2-container-proxy-c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROXY_PORT 14979
#define PROGRAM_PORT 14978
#define LAUNCH_PATH "/.proxy/launch.json"
#define MEMORY_EVENTS_PATH "/.proxy/memory-events"
#define MAX_MESSAGE (256u * 1024 * 1024)
/* the program's requests at once; one more is closed unanswered */
#define MAX_HTTP 1024
#define MAX_SCOPES 256

/* frame types (docs/containers.md section 1) */
enum { F_AUTH = 0, F_REQUEST = 1, F_RESPONSE = 2, F_FINISH = 3, F_CREQUEST = 4, F_CRESPONSE = 5, F_CFINISH = 6 };
enum { A_OK = 0x00, A_ERROR = 0x06, A_ACTIVE = 0x07, A_INACTIVE = 0x08, A_BEGUN = 0x10 };

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void say(const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (n > (int)sizeof line - 2) n = sizeof line - 2;
  line[n++] = '\n';
  ssize_t ignored = write(2, "ocx2-container-proxy: ", 22);
  ignored = write(2, line, n);
  (void)ignored;
}

/* ---------- growable byte buffers ---------- */

struct buf {
  uint8_t *data;
  size_t start, end, cap;
};

static void buf_reserve(struct buf *b, size_t more) {
  if (b->start > 0 && b->start == b->end) b->start = b->end = 0;
  if (b->end + more <= b->cap) return;
  if (b->start > 0) {
    memmove(b->data, b->data + b->start, b->end - b->start);
    b->end -= b->start;
    b->start = 0;
    if (b->end + more <= b->cap) return;
  }
  size_t cap = b->cap == 0 ? 4096 : b->cap;
  while (cap < b->end + more) cap *= 2;
  uint8_t *d = realloc(b->data, cap);
  if (d == NULL) {
    say("out of memory");
    _exit(1);
  }
  b->data = d;
  b->cap = cap;
}

static void buf_put(struct buf *b, const void *p, size_t n) {
  buf_reserve(b, n);
  memcpy(b->data + b->end, p, n);
  b->end += n;
}

static size_t buf_len(const struct buf *b) { return b->end - b->start; }

static void buf_free(struct buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* writes what it can without blocking; -1 when the peer is gone */
static int buf_flush(struct buf *b, int fd) {
  while (buf_len(b) > 0) {
    ssize_t n = send(fd, b->data + b->start, buf_len(b), MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = write(fd, b->data + b->start, buf_len(b));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -1;
    }
    b->start += (size_t)n;
  }
  b->start = b->end = 0;
  return 0;
}

/* ---------- JSON: what the launch file, the secrets and the rotating secrets need ---------- */

static const char *ws_skip(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static void put_utf8(struct buf *out, uint32_t c) {
  uint8_t b[4];
  size_t n;
  if (c < 0x80) b[0] = c, n = 1;
  else if (c < 0x800) b[0] = 0xC0 | (c >> 6), b[1] = 0x80 | (c & 0x3F), n = 2;
  else if (c < 0x10000) b[0] = 0xE0 | (c >> 12), b[1] = 0x80 | ((c >> 6) & 0x3F), b[2] = 0x80 | (c & 0x3F), n = 3;
  else b[0] = 0xF0 | (c >> 18), b[1] = 0x80 | ((c >> 12) & 0x3F), b[2] = 0x80 | ((c >> 6) & 0x3F), b[3] = 0x80 | (c & 0x3F), n = 4;
  if (out != NULL) buf_put(out, b, n);
}

/* a JSON string at p (its quote); its value into OUT (NUL-ended) when OUT is given; the end, or NULL */
static const char *json_string(const char *p, const char *e, struct buf *out) {
  if (p >= e || *p != '"') return NULL;
  p++;
  while (p < e && *p != '"') {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20) return NULL;
    if (c != '\\') {
      if (out != NULL) buf_put(out, p, 1);
      p++;
      continue;
    }
    if (++p >= e) return NULL;
    char k = *p++;
    const char *simple = strchr("\"\\/bfnrt", k);
    if (k != 0 && simple != NULL) {
      static const char to[] = "\"\\/\b\f\n\r\t";
      if (out != NULL) buf_put(out, &to[simple - "\"\\/bfnrt"], 1);
      continue;
    }
    if (k != 'u' || e - p < 4) return NULL;
    uint32_t u = 0;
    for (int i = 0; i < 4; i++) {
      int h = hexval(p[i]);
      if (h < 0) return NULL;
      u = u * 16 + h;
    }
    p += 4;
    if (u >= 0xD800 && u < 0xDC00 && e - p >= 6 && p[0] == '\\' && p[1] == 'u') {
      uint32_t l = 0;
      int ok = 1;
      for (int i = 0; i < 4; i++) {
        int h = hexval(p[2 + i]);
        if (h < 0) ok = 0;
        else l = l * 16 + h;
      }
      if (ok && l >= 0xDC00 && l < 0xE000) {
        u = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
        p += 6;
      }
    }
    if (u >= 0xD800 && u < 0xE000) u = 0xFFFD;
    put_utf8(out, u);
  }
  if (p >= e) return NULL;
  if (out != NULL) {
    buf_put(out, "", 1);
    out->end--;
  }
  return p + 1;
}

static const char *json_value(const char *p, const char *e, int depth);

static const char *json_number(const char *p, const char *e) {
  if (p < e && *p == '-') p++;
  if (p >= e) return NULL;
  if (*p == '0') p++;
  else if (*p >= '1' && *p <= '9') while (p < e && *p >= '0' && *p <= '9') p++;
  else return NULL;
  if (p < e && *p == '.') {
    p++;
    if (p >= e || *p < '0' || *p > '9') return NULL;
    while (p < e && *p >= '0' && *p <= '9') p++;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < e && (*p == '+' || *p == '-')) p++;
    if (p >= e || *p < '0' || *p > '9') return NULL;
    while (p < e && *p >= '0' && *p <= '9') p++;
  }
  return p;
}

static const char *json_value(const char *p, const char *e, int depth) {
  if (depth > 512) return NULL;
  p = ws_skip(p, e);
  if (p >= e) return NULL;
  if (*p == '"') return json_string(p, e, NULL);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    int object = *p == '{';
    p = ws_skip(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
      if (object) {
        p = json_string(ws_skip(p, e), e, NULL);
        if (p == NULL) return NULL;
        p = ws_skip(p, e);
        if (p >= e || *p != ':') return NULL;
        p++;
      }
      p = json_value(p, e, depth + 1);
      if (p == NULL) return NULL;
      p = ws_skip(p, e);
      if (p < e && *p == ',') {
        p++;
        continue;
      }
      if (p < e && *p == close) return p + 1;
      return NULL;
    }
  }
  if (e - p >= 4 && memcmp(p, "true", 4) == 0) return p + 4;
  if (e - p >= 5 && memcmp(p, "false", 5) == 0) return p + 5;
  if (e - p >= 4 && memcmp(p, "null", 4) == 0) return p + 4;
  return json_number(p, e);
}

/* the whole text is one JSON object (as JSON.parse takes it) */
static int is_json_object(const uint8_t *data, size_t n) {
  const char *p = (const char *)data, *e = p + n;
  p = ws_skip(p, e);
  if (p >= e || *p != '{') return 0;
  p = json_value(p, e, 0);
  return p != NULL && ws_skip(p, e) == e;
}

/* the value of KEY in the object at p..e (its first character), or NULL */
static const char *json_member(const char *p, const char *e, const char *key) {
  p = ws_skip(p, e);
  if (p >= e || *p != '{') return NULL;
  p = ws_skip(p + 1, e);
  if (p < e && *p == '}') return NULL;
  for (;;) {
    struct buf name = {0};
    p = json_string(ws_skip(p, e), e, &name);
    if (p == NULL) return buf_free(&name), NULL;
    int match = strcmp(name.data == NULL ? "" : (char *)name.data, key) == 0;
    buf_free(&name);
    p = ws_skip(p, e);
    if (p >= e || *p != ':') return NULL;
    p = ws_skip(p + 1, e);
    if (match) return p;
    p = json_value(p, e, 0);
    if (p == NULL) return NULL;
    p = ws_skip(p, e);
    if (p < e && *p == ',') {
      p++;
      continue;
    }
    return NULL;
  }
}

/* a JSON array of strings at p: each string, NUL-ended, in a NULL-ended array */
static char **json_strings(const char *p, const char *e) {
  if (p == NULL || p >= e || *p != '[') return NULL;
  size_t n = 0, cap = 8;
  char **out = calloc(cap, sizeof *out);
  p = ws_skip(p + 1, e);
  if (p < e && *p == ']') return out;
  for (;;) {
    struct buf s = {0};
    buf_reserve(&s, 1);
    p = json_string(ws_skip(p, e), e, &s);
    if (p == NULL) return NULL;
    s.data[s.end] = 0;
    if (n + 2 > cap) out = realloc(out, (cap *= 2) * sizeof *out);
    out[n++] = (char *)s.data;
    out[n] = NULL;
    p = ws_skip(p, e);
    if (p < e && *p == ',') {
      p++;
      continue;
    }
    if (p < e && *p == ']') return out;
    return NULL;
  }
}

static int json_int(const char *p, const char *e, long *out) {
  if (p == NULL) return 0;
  const char *end = json_number(p, e);
  if (end == NULL) return 0;
  char text[32];
  if (end - p >= (long)sizeof text) return 0;
  memcpy(text, p, end - p);
  text[end - p] = 0;
  char *stop;
  *out = strtol(text, &stop, 10);
  return *stop == 0;
}

/* ---------- the launch ---------- */

static char **command, **environment;
static char *workingDir;
static char *declaration;
static size_t declarationLength;
static long runAsUid = -1, runAsGid = -1;
static int outStdout = -1, outStderr = -1;

static void readLaunch(void) {
  int fd = open(LAUNCH_PATH, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    say("cannot read the launch file %s: %s", LAUNCH_PATH, strerror(errno));
    exit(1);
  }
  struct buf text = {0};
  for (;;) {
    buf_reserve(&text, 65536);
    ssize_t n = read(fd, text.data + text.end, 65536);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.end += (size_t)n;
  }
  close(fd);
  const char *p = (const char *)text.data, *e = p + text.end;
  if (text.end == 0 || !is_json_object(text.data, text.end)) {
    say("the launch file is not a JSON object (%s)", LAUNCH_PATH);
    exit(1);
  }
  command = json_strings(json_member(p, e, "command"), e);
  environment = json_strings(json_member(p, e, "env"), e);
  struct buf wd = {0}, secrets = {0};
  const char *w = json_member(p, e, "workingDir");
  const char *s = json_member(p, e, "secrets");
  buf_reserve(&wd, 1);
  buf_reserve(&secrets, 1);
  if (command == NULL || command[0] == NULL || environment == NULL || w == NULL || json_string(w, e, &wd) == NULL || wd.data[0] != '/' ||
      s == NULL || json_string(s, e, &secrets) == NULL || !is_json_object(secrets.data, secrets.end)) {
    say("the launch file is not {command, env, workingDir, secrets, user?, output?} (%s)", LAUNCH_PATH);
    exit(1);
  }
  workingDir = (char *)wd.data;
  declaration = (char *)secrets.data;
  declarationLength = secrets.end;
  const char *user = json_member(p, e, "user");
  if (user != NULL && (!json_int(json_member(user, e, "uid"), e, &runAsUid) || !json_int(json_member(user, e, "gid"), e, &runAsGid))) {
    say("the launch's user is not {uid, gid}");
    exit(1);
  }
  const char *output = json_member(p, e, "output");
  long o1, o2;
  if (output != NULL) {
    if (!json_int(json_member(output, e, "stdout"), e, &o1) || !json_int(json_member(output, e, "stderr"), e, &o2)) {
      say("the launch's output is not {stdout, stderr}");
      exit(1);
    }
    outStdout = (int)o1;
    outStderr = (int)o2;
  }
  buf_free(&text);
}

/* ---------- SHA-1 and base64, for the handshake's Sec-WebSocket-Accept ---------- */

static uint32_t rol(uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

static void sha1(const uint8_t *msg, size_t len, uint8_t out[20]) {
  uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  size_t total = ((len + 8) / 64 + 1) * 64;
  uint8_t *m = calloc(total, 1);
  memcpy(m, msg, len);
  m[len] = 0x80;
  uint64_t bits = (uint64_t)len * 8;
  for (int i = 0; i < 8; i++) m[total - 1 - i] = (uint8_t)(bits >> (8 * i));
  for (size_t off = 0; off < total; off += 64) {
    uint32_t w[80];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)m[off + 4 * i] << 24 | (uint32_t)m[off + 4 * i + 1] << 16 | (uint32_t)m[off + 4 * i + 2] << 8 | m[off + 4 * i + 3];
    for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
      uint32_t f, k;
      if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999;
      else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1;
      else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
      else f = b ^ c ^ d, k = 0xCA62C1D6;
      uint32_t t = rol(a, 5) + f + e + k + w[i];
      e = d, d = c, c = rol(b, 30), b = a, a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
  }
  free(m);
  for (int i = 0; i < 5; i++) out[4 * i] = h[i] >> 24, out[4 * i + 1] = h[i] >> 16, out[4 * i + 2] = h[i] >> 8, out[4 * i + 3] = h[i];
}

static void base64(const uint8_t *in, size_t n, char *out) {
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    out[o++] = t[(v >> 18) & 63];
    out[o++] = t[(v >> 12) & 63];
    out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
    out[o++] = i + 2 < n ? t[v & 63] : '=';
  }
  out[o] = 0;
}

/* ---------- state ---------- */

static int wsListen = -1, apiListen = -1;
static int ws = -1;              /* the server's one connection */
static int wsUpgraded = 0;       /* its handshake answered */
static struct buf wsIn, wsOut;
static struct buf fragments;     /* a fragmented message's data so far */
static int fragmented = 0;
static uint32_t lastScope = 0;

static uint32_t beginScope = 0;  /* 0: not begun */
static int beginEnded = 0;
static uint32_t lastChannel = 0; /* the channels this side opened on the begin scope */
static int inFlight = 0;
static uint8_t *begunBody;        /* {"template","arguments"} as the server sent them */
static size_t begunLength;
static uint8_t *secretValues;     /* the values last fed; NULL until the first */
static size_t secretLength;
static struct buf rotating; /* {} until the program puts its own */

/* the scopes the FUSE side serves */
static uint32_t fuseScopes[MAX_SCOPES];
static int fuseScopeCount = 0;
static char **fuseCommand;
static int fuseSide = -1;
static pid_t fusePid = 0;
static struct buf fuseIn, fuseOut;

static pid_t program = 0;
static int programEnded = 0;
static char *programError; /* NULL: a clean exit */
static int startErrorPipe = -1;

struct http {
  int fd;
  struct buf in, out;
  int parsed;          /* its request read whole */
  int continued;       /* 100 Continue sent, for a client that waits for it before its body */
  int waiting;         /* 1 /begin, 2 /secrets, 3 an ask waiting for the begin */
  uint32_t channel;    /* the ask's channel, while it is answered */
  int closing;         /* close once what waits was written */
  char method[8];
  char path[64];
  uint8_t *body;
  size_t bodyLength;
};
static struct http https[MAX_HTTP];

/* an ask's channel whose program connection went: its answers are read and dropped */
static uint32_t orphanChannels[1024];
static int orphanCount = 0;

/* ---------- the WebSocket to the server ---------- */

static void wsSend(uint8_t opcode, const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  uint8_t header[10];
  size_t n = an + bn, h = 2;
  header[0] = 0x80 | opcode;
  if (n < 126) header[1] = (uint8_t)n;
  else if (n < 65536) header[1] = 126, header[2] = n >> 8, header[3] = n & 0xFF, h = 4;
  else {
    header[1] = 127;
    for (int i = 0; i < 8; i++) header[2 + i] = (uint8_t)((uint64_t)n >> (8 * (7 - i)));
    h = 10;
  }
  buf_put(&wsOut, header, h);
  if (an > 0) buf_put(&wsOut, a, an);
  if (bn > 0) buf_put(&wsOut, b, bn);
}

static void sendFrame(uint8_t type, uint32_t scope, uint32_t channel, const uint8_t *payload, size_t n) {
  uint8_t head[9];
  head[0] = type;
  head[1] = scope >> 24, head[2] = scope >> 16, head[3] = scope >> 8, head[4] = scope;
  head[5] = channel >> 24, head[6] = channel >> 16, head[7] = channel >> 8, head[8] = channel;
  wsSend(2, head, 9, payload, n);
}

static void sendTagged(uint8_t type, uint32_t scope, uint32_t channel, uint8_t tag, const void *body, size_t n) {
  uint8_t *p = malloc(n + 1);
  p[0] = tag;
  if (n > 0) memcpy(p + 1, body, n);
  sendFrame(type, scope, channel, p, n + 1);
  free(p);
}

static void refuseScope(uint32_t scope, const char *message) {
  sendTagged(F_RESPONSE, scope, 0, A_ERROR, message, strlen(message));
  sendFrame(F_FINISH, scope, 0, NULL, 0);
}

static void finishAll(void);

/* the server's connection ended: the FUSE side unmounts and ends, the program is ended, and so is this */
static void theEnd(int status) {
  finishAll();
  if (fuseSide >= 0) {
    close(fuseSide);
    fuseSide = -1;
    /* its mounts go with the container's mount namespace anyway; it is given a moment to unmount them */
    for (int i = 0; i < 100 && fusePid > 0; i++) {
      if (waitpid(fusePid, NULL, WNOHANG) == fusePid) break;
      usleep(10000);
    }
  }
  if (program > 0 && !programEnded) kill(program, SIGKILL);
  exit(status);
}

static void closeServer(uint16_t code, const char *reason) {
  uint8_t body[125];
  body[0] = code >> 8, body[1] = code & 0xFF;
  size_t n = strlen(reason);
  if (n > 123) n = 123;
  memcpy(body + 2, reason, n);
  wsSend(8, body, n + 2, NULL, 0);
  fcntl(ws, F_SETFL, fcntl(ws, F_GETFL) & ~O_NONBLOCK);
  buf_flush(&wsOut, ws);
  theEnd(0);
}

/* ---------- the program ---------- */

static const char *errnoName(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOEXEC: return "ENOEXEC";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case E2BIG: return "E2BIG";
    case ENOMEM: return "ENOMEM";
    case EINVAL: return "EINVAL";
    case ETXTBSY: return "ETXTBSY";
    case EAGAIN: return "EAGAIN";
    case EIO: return "EIO";
    case EMFILE: return "EMFILE";
    default: return "EUNKNOWN";
  }
}

static const char *signalName(int s) {
  static char other[16];
  switch (s) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGSYS: return "SIGSYS";
    default: snprintf(other, sizeof other, "signal %d", s); return other;
  }
}

static long oomKills(void) {
  int fd = open(MEMORY_EVENTS_PATH, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[4096];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = 0;
  for (char *line = text; line != NULL && *line != 0;) {
    if (strncmp(line, "oom_kill ", 9) == 0) return strtol(line + 9, NULL, 10);
    line = strchr(line, '\n');
    if (line != NULL) line++;
  }
  return 0;
}

/* the program's end ends the begin scope: its error first, when it failed */
static void endBegin(void) {
  if (beginScope == 0 || beginEnded || !programEnded) return;
  if (programError != NULL) sendTagged(F_RESPONSE, beginScope, 0, A_ERROR, programError, strlen(programError));
  sendFrame(F_FINISH, beginScope, 0, NULL, 0);
  beginEnded = 1;
  inFlight = 0;
  /* the scope's finish ends its channels: every ask's response ends with it */
  for (int i = 0; i < MAX_HTTP; i++)
    if (https[i].fd >= 0 && https[i].channel != 0) https[i].channel = 0, https[i].closing = 1;
}

static void ended(char *error) {
  if (programEnded) {
    free(error);
    return;
  }
  programEnded = 1;
  programError = error;
  say("%s", error != NULL ? error : "the program ended");
  endBegin();
}

/* the file execvp would run, PATH taken from the program's environment as Node's spawn does */
static const char *pathOf(void) {
  for (char **e = environment; *e != NULL; e++) if (strncmp(*e, "PATH=", 5) == 0) return *e + 5;
  return "/usr/local/bin:/usr/bin:/bin";
}

static void startProgram(void) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) < 0) {
    char *m;
    if (asprintf(&m, "the program %s could not be started: %s", command[0], strerror(errno)) < 0) m = NULL;
    ended(m);
    return;
  }
  pid_t pid = fork();
  if (pid == 0) {
    int err = 0;
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0 && null != 0) dup2(null, 0), close(null);
    if (outStdout >= 0) dup2(outStdout, 1);
    if (outStderr >= 0) dup2(outStderr, 2);
    for (int fd = 3; fd < 1024; fd++) if (fd != pipefd[1]) close(fd);
    if (runAsGid >= 0 || runAsUid >= 0) {
      if (setgroups(0, NULL) < 0 && errno != EPERM) err = errno;
      if (!err && runAsGid >= 0 && setgid((gid_t)runAsGid) < 0) err = errno;
      if (!err && runAsUid >= 0 && setuid((uid_t)runAsUid) < 0) err = errno;
    }
    if (!err && chdir(workingDir) < 0) err = errno;
    if (!err) {
      if (strchr(command[0], '/') != NULL) execve(command[0], command, environment);
      else {
        const char *path = pathOf();
        int seen = ENOENT;
        for (const char *p = path;; p++) {
          const char *colon = strchr(p, ':');
          size_t dl = colon == NULL ? strlen(p) : (size_t)(colon - p);
          char file[4096];
          snprintf(file, sizeof file, "%.*s%s%s", (int)dl, p, dl > 0 ? "/" : "", command[0]);
          execve(file, command, environment);
          if (errno == EACCES) seen = EACCES;
          else if (errno != ENOENT && errno != ENOTDIR) {
            seen = errno;
            break;
          }
          if (colon == NULL) break;
          p = colon;
        }
        errno = seen;
      }
      err = errno;
    }
    ssize_t ignored = write(pipefd[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  close(pipefd[1]);
  /* the program has its copies: the proxy keeps none (the server sees the stream end with the program) */
  if (outStdout >= 0) close(outStdout);
  if (outStderr >= 0) close(outStderr);
  if (pid < 0) {
    close(pipefd[0]);
    char *m;
    if (asprintf(&m, "the program %s could not be started: spawn %s %s", command[0], command[0], errnoName(errno)) < 0) m = NULL;
    ended(m);
    return;
  }
  program = pid;
  startErrorPipe = pipefd[0];
}

/* the program's start failed (its errno came through the pipe) or succeeded (the pipe closed with exec) */
static int startError = 0;
static void readStartError(void) {
  int err = 0;
  ssize_t n = read(startErrorPipe, &err, sizeof err);
  close(startErrorPipe);
  startErrorPipe = -1;
  if (n == (ssize_t)sizeof err && err != 0) startError = err;
}

static void programExited(int status) {
  char *m = NULL;
  if (startErrorPipe >= 0) readStartError();
  if (startError != 0) {
    int r;
    struct stat st;
    if (startError != ENOENT) r = asprintf(&m, "the program %s could not be started: spawn %s %s", command[0], command[0], errnoName(startError));
    else if (stat(workingDir, &st) == 0 && S_ISDIR(st.st_mode)) r = asprintf(&m, "the program %s could not be started: spawn %s ENOENT", command[0], command[0]);
    else if (stat(workingDir, &st) == 0)
      r = asprintf(&m, "the program %s could not be started: its working directory %s is not a directory (spawn %s ENOENT)", command[0], workingDir, command[0]);
    else r = asprintf(&m, "the program %s could not be started: its working directory %s does not exist (spawn %s ENOENT)", command[0], workingDir, command[0]);
    if (r < 0) m = NULL;
    return ended(m);
  }
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) == 0) return ended(NULL);
    if (asprintf(&m, "the program ended with exit status %d", WEXITSTATUS(status)) < 0) m = NULL;
    return ended(m);
  }
  int s = WTERMSIG(status);
  const char *oom = oomKills() > 0 ? ", out of memory: it passed the container's memory limit" : "";
  if (asprintf(&m, "the program was killed by %s%s", signalName(s), oom) < 0) m = NULL;
  ended(m);
}

/* ---------- the program's API ---------- */

static void httpClose(struct http *h) {
  if (h->fd >= 0) close(h->fd);
  buf_free(&h->in);
  buf_free(&h->out);
  free(h->body);
  if (h->channel != 0 && orphanCount < (int)(sizeof orphanChannels / sizeof *orphanChannels)) orphanChannels[orphanCount++] = h->channel;
  memset(h, 0, sizeof *h);
  h->fd = -1;
}

static void httpAnswer(struct http *h, int status, const char *type, const void *body, size_t n) {
  const char *reason = status == 200 ? "OK" : status == 204 ? "No Content" : status == 400 ? "Bad Request" : status == 404 ? "Not Found" : status == 409 ? "Conflict" : "Internal Server Error";
  char head[256];
  int hn = status == 204 ? snprintf(head, sizeof head, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                         : snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status, reason, type, n);
  buf_put(&h->out, head, hn);
  if (status != 204 && n > 0) buf_put(&h->out, body, n);
  h->closing = 1;
}

static void httpFail(struct http *h, int status, const char *message) {
  char text[256];
  int n = snprintf(text, sizeof text, "%s\n", message);
  httpAnswer(h, status, "text/plain; charset=utf-8", text, n);
}

static void openAsk(struct http *h, uint8_t tag) {
  if (beginEnded) return httpFail(h, 409, "the run has ended");
  if (inFlight++ == 0) sendTagged(F_RESPONSE, beginScope, 0, A_ACTIVE, NULL, 0);
  h->channel = ++lastChannel;
  sendTagged(F_CREQUEST, beginScope, h->channel, tag, h->body, h->bodyLength);
  const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n";
  buf_put(&h->out, head, strlen(head));
}

static void serve(struct http *h) {
  if (strcmp(h->method, "GET") == 0 && strcmp(h->path, "/begin") == 0) {
    if (begunBody == NULL) return (void)(h->waiting = 1);
    return httpAnswer(h, 200, "application/json", begunBody, begunLength);
  }
  if (strcmp(h->method, "GET") == 0 && strcmp(h->path, "/secrets") == 0) {
    if (secretValues == NULL) return (void)(h->waiting = 2);
    return httpAnswer(h, 200, "application/json", secretValues, secretLength);
  }
  if ((strcmp(h->method, "PUT") == 0 || strcmp(h->method, "POST") == 0) && strcmp(h->path, "/rotating") == 0) {
    if (!is_json_object(h->body, h->bodyLength)) return httpFail(h, 400, "the rotating secrets are a JSON object");
    rotating.start = rotating.end = 0;
    buf_put(&rotating, h->body, h->bodyLength);
    return httpAnswer(h, 204, "", NULL, 0);
  }
  if (strcmp(h->method, "POST") == 0 && strncmp(h->path, "/ask/", 5) == 0 && h->path[5] != 0 && strspn(h->path + 5, "0123456789") == strlen(h->path + 5)) {
    long tag = strlen(h->path + 5) > 4 ? 9999 : strtol(h->path + 5, NULL, 10);
    if (tag < 16 || tag > 255) return httpFail(h, 400, "an ask's tag is 16 to 255");
    if (begunBody == NULL) return (void)(h->waiting = 3);
    return openAsk(h, (uint8_t)tag);
  }
  httpFail(h, 404, "GET /begin, GET /secrets, PUT /rotating, POST /ask/TAG");
}

/* what waited for the begin or the first feed */
static void wake(int what) {
  for (int i = 0; i < MAX_HTTP; i++) {
    struct http *h = &https[i];
    if (h->fd < 0 || h->waiting == 0) continue;
    if (h->waiting == what || (what == 1 && h->waiting == 3)) {
      h->waiting = 0;
      serve(h);
    }
  }
}

static size_t headerValue(const char *head, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *line = strstr(head, "\r\n"); line != NULL; line = strstr(line, "\r\n")) {
    line += 2;
    if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
      const char *v = line + nl + 1;
      while (*v == ' ' || *v == '\t') v++;
      const char *end = strstr(v, "\r\n");
      size_t n = end == NULL ? strlen(v) : (size_t)(end - v);
      while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
      if (n >= cap) n = cap - 1;
      memcpy(out, v, n);
      out[n] = 0;
      return n + 1;
    }
  }
  return 0;
}

/* a chunked body from p: its bytes into OUT; the bytes it took, 0 while incomplete, -1 malformed */
static long dechunk(const uint8_t *p, size_t n, struct buf *out) {
  size_t i = 0;
  for (;;) {
    const uint8_t *crlf = memmem(p + i, n - i, "\r\n", 2);
    if (crlf == NULL) return 0;
    char *stop;
    unsigned long size = strtoul((const char *)p + i, &stop, 16);
    if ((const uint8_t *)stop == p + i) return -1;
    i = (size_t)(crlf - p) + 2;
    if (size == 0) {
      /* trailers, then the empty line */
      for (;;) {
        const uint8_t *end = memmem(p + i, n - i, "\r\n", 2);
        if (end == NULL) return 0;
        if (end == p + i) return (long)(i + 2);
        i = (size_t)(end - p) + 2;
      }
    }
    if (n - i < size + 2) return 0;
    buf_put(out, p + i, size);
    i += size + 2;
  }
}

/* curl asks before sending a larger body (Expect: 100-continue) and waits a second unless answered: answered at once, as Node's server does */
static void continueBody(struct http *h, const char *head) {
  char value[64];
  if (h->continued || headerValue(head, "Expect", value, sizeof value) == 0 || strcasecmp(value, "100-continue") != 0) return;
  const char *go = "HTTP/1.1 100 Continue\r\n\r\n";
  buf_put(&h->out, go, strlen(go));
  h->continued = 1;
}

static void httpRead(struct http *h) {
  for (;;) {
    buf_reserve(&h->in, 65536);
    ssize_t n = read(h->fd, h->in.data + h->in.end, h->in.cap - h->in.end);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) return httpClose(h);
    h->in.end += (size_t)n;
    if (buf_len(&h->in) > 64 * 1024 * 1024) return httpClose(h);
  }
  if (h->parsed) return;
  uint8_t *d = h->in.data + h->in.start;
  size_t len = buf_len(&h->in);
  uint8_t *headEnd = memmem(d, len, "\r\n\r\n", 4);
  if (headEnd == NULL) {
    if (len > 65536) httpClose(h);
    return;
  }
  size_t headLength = (size_t)(headEnd - d) + 4;
  char *head = strndup((char *)d, headLength);
  char path[4096];
  if (sscanf(head, "%7s %4095s", h->method, path) != 2) {
    free(head);
    h->parsed = 1;
    return httpFail(h, 400, "not an HTTP request");
  }
  char *query = strchr(path, '?');
  if (query != NULL) *query = 0;
  if (strlen(path) < sizeof h->path) memcpy(h->path, path, strlen(path) + 1);
  else memcpy(h->path, "/too-long", 10);
  char value[64];
  struct buf body = {0};
  continueBody(h, head);
  if (headerValue(head, "Transfer-Encoding", value, sizeof value) > 0 && strcasestr(value, "chunked") != NULL) {
    long took = dechunk(headEnd + 4, len - headLength, &body);
    if (took == 0) return free(head), buf_free(&body);
    if (took < 0) {
      free(head);
      buf_free(&body);
      h->parsed = 1;
      return httpFail(h, 400, "a chunked body that is not");
    }
  } else {
    size_t length = headerValue(head, "Content-Length", value, sizeof value) > 0 ? strtoul(value, NULL, 10) : 0;
    if (len - headLength < length) return free(head);
    buf_put(&body, headEnd + 4, length);
  }
  free(head);
  h->parsed = 1;
  h->body = body.data;
  h->bodyLength = buf_len(&body);
  serve(h);
}

/* ---------- the frames of the server's connection ---------- */

static int isFuseScope(uint32_t scope) {
  for (int i = 0; i < fuseScopeCount; i++) if (fuseScopes[i] == scope) return 1;
  return 0;
}

static void forgetFuseScope(uint32_t scope) {
  for (int i = 0; i < fuseScopeCount; i++)
    if (fuseScopes[i] == scope) {
      fuseScopes[i] = fuseScopes[--fuseScopeCount];
      return;
    }
}

static void toFuseSide(const uint8_t *frame, size_t n) {
  uint8_t len[4] = {n >> 24, n >> 16, n >> 8, n};
  buf_put(&fuseOut, len, 4);
  buf_put(&fuseOut, frame, n);
}

static int startFuseSide(void) {
  if (fuseSide >= 0) return 1;
  if (fuseCommand == NULL || fuseCommand[0] == NULL) return 0;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    dup2(pair[1], 3);
    for (int fd = 4; fd < 1024; fd++) close(fd);
    char *env[] = {"PWD=/", NULL};
    execve(fuseCommand[0], fuseCommand, env);
    say("the FUSE side %s could not be started: %s", fuseCommand[0], strerror(errno));
    _exit(127);
  }
  close(pair[1]);
  if (pid < 0) {
    close(pair[0]);
    return 0;
  }
  fusePid = pid;
  fuseSide = pair[0];
  fcntl(fuseSide, F_SETFL, O_NONBLOCK);
  return 1;
}

/* the FUSE side ended: every scope it served is ended for it */
static void fuseSideGone(void) {
  if (fuseSide >= 0) close(fuseSide);
  fuseSide = -1;
  buf_free(&fuseIn);
  buf_free(&fuseOut);
  for (int i = 0; i < fuseScopeCount; i++) refuseScope(fuseScopes[i], "the proxy's FUSE side ended");
  fuseScopeCount = 0;
}

static void onBeginChannel(uint32_t channel, const uint8_t *payload, size_t n) {
  if (n == 0 || payload[0] != 1) return sendFrame(F_CFINISH, beginScope, channel, NULL, 0);
  if (!is_json_object(payload + 1, n - 1)) {
    const char *m = "the secrets are not a JSON object";
    sendTagged(F_CRESPONSE, beginScope, channel, A_ERROR, m, strlen(m));
    return sendFrame(F_CFINISH, beginScope, channel, NULL, 0);
  }
  int first = secretValues == NULL;
  free(secretValues);
  secretValues = malloc(n);
  memcpy(secretValues, payload + 1, n - 1);
  secretLength = n - 1;
  sendTagged(F_CRESPONSE, beginScope, channel, A_OK, NULL, 0);
  sendFrame(F_CFINISH, beginScope, channel, NULL, 0);
  if (first) wake(2);
}

static struct http *askOf(uint32_t channel) {
  for (int i = 0; i < MAX_HTTP; i++) if (https[i].fd >= 0 && https[i].channel == channel) return &https[i];
  return NULL;
}

static int orphan(uint32_t channel, int forget) {
  for (int i = 0; i < orphanCount; i++)
    if (orphanChannels[i] == channel) {
      if (forget) orphanChannels[i] = orphanChannels[--orphanCount];
      return 1;
    }
  return 0;
}

static void askAnswered(void) {
  if (--inFlight == 0 && !beginEnded) sendTagged(F_RESPONSE, beginScope, 0, A_INACTIVE, rotating.data + rotating.start, buf_len(&rotating));
}

/* the server's ends, at the end: every ask's response closed */
static void finishAll(void) {
  for (int i = 0; i < MAX_HTTP; i++) if (https[i].fd >= 0) httpClose(&https[i]);
}

static void onFrame(const uint8_t *m, size_t n) {
  if (n < 9) return closeServer(1002, "not a frame");
  uint8_t type = m[0];
  uint32_t scope = (uint32_t)m[1] << 24 | (uint32_t)m[2] << 16 | (uint32_t)m[3] << 8 | m[4];
  uint32_t channel = (uint32_t)m[5] << 24 | (uint32_t)m[6] << 16 | (uint32_t)m[7] << 8 | m[8];
  const uint8_t *payload = m + 9;
  size_t pn = n - 9;
  if (type > F_CFINISH) return closeServer(1002, "not a frame");
  if (type == F_AUTH || type == F_RESPONSE || type == F_FINISH) return closeServer(1002, "a frame the server may not send");
  if (type == F_REQUEST) {
    if (channel != 0 || scope <= lastScope) return closeServer(1002, "a scope number not greater than the last");
    lastScope = scope;
    uint8_t tag = pn > 0 ? payload[0] : 0xFF;
    if (tag == 1) {
      if (beginScope != 0) return refuseScope(scope, "the begin scope is open already");
      beginScope = scope;
      struct buf b = {0};
      buf_put(&b, "{\"secrets\":", 11);
      buf_put(&b, declaration, declarationLength);
      buf_put(&b, "}", 1);
      sendTagged(F_RESPONSE, scope, 0, A_BEGUN, b.data, b.end);
      buf_free(&b);
      /* a program that takes no secret (a declaration with nothing between its braces) is fed {} at once */
      const char *q = declaration + 1;
      while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r') q++;
      if (*q == '}' && secretValues == NULL) {
        secretValues = (uint8_t *)strdup("{}");
        secretLength = 2;
      }
      begunBody = malloc(pn);
      memcpy(begunBody, payload + 1, pn - 1);
      begunLength = pn - 1;
      wake(1);
      wake(2);
      endBegin();
      return;
    }
    if (tag == 2) {
      if (fuseScopeCount >= MAX_SCOPES || !startFuseSide()) return refuseScope(scope, "this proxy cannot make FUSE mounts: its FUSE side could not be started");
      fuseScopes[fuseScopeCount++] = scope;
      return toFuseSide(m, n);
    }
    if (tag == 3) return refuseScope(scope, "this proxy serves no tree: FUSE is not available in it yet");
    return refuseScope(scope, "this proxy serves no such scope");
  }
  if (isFuseScope(scope)) return toFuseSide(m, n);
  if (scope == 0 || scope != beginScope || beginEnded) return;
  if (type == F_CREQUEST) return onBeginChannel(channel, payload, pn);
  /* an answer on an ask's channel */
  if (channel == 0 || channel > lastChannel) return closeServer(1002, "a response for a channel not opened");
  struct http *h = askOf(channel);
  if (h == NULL) {
    if (!orphan(channel, type == F_CFINISH)) return;
    if (type == F_CFINISH) askAnswered();
    return;
  }
  if (type == F_CRESPONSE) {
    uint8_t len[4] = {pn >> 24, pn >> 16, pn >> 8, pn};
    buf_put(&h->out, len, 4);
    buf_put(&h->out, payload, pn);
  } else {
    h->channel = 0;
    h->closing = 1;
    askAnswered();
  }
}

/* the frames the FUSE side sends: on as they came; a finish of a scope is its end */
static void fuseSideRead(void) {
  for (;;) {
    buf_reserve(&fuseIn, 65536);
    ssize_t n = read(fuseSide, fuseIn.data + fuseIn.end, fuseIn.cap - fuseIn.end);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) return fuseSideGone();
    fuseIn.end += (size_t)n;
  }
  while (buf_len(&fuseIn) >= 4) {
    uint8_t *d = fuseIn.data + fuseIn.start;
    size_t len = (size_t)d[0] << 24 | (size_t)d[1] << 16 | (size_t)d[2] << 8 | d[3];
    if (buf_len(&fuseIn) < 4 + len) break;
    if (len >= 9) {
      uint32_t scope = (uint32_t)d[5] << 24 | (uint32_t)d[6] << 16 | (uint32_t)d[7] << 8 | d[8];
      if (isFuseScope(scope)) {
        wsSend(2, d + 4, len, NULL, 0);
        if (d[4] == F_FINISH) forgetFuseScope(scope);
      }
    }
    fuseIn.start += 4 + len;
  }
}

/* the server's bytes: the handshake first, then WebSocket frames (RFC 6455) */
static void wsHandshake(void) {
  uint8_t *d = wsIn.data + wsIn.start;
  uint8_t *end = memmem(d, buf_len(&wsIn), "\r\n\r\n", 4);
  if (end == NULL) {
    if (buf_len(&wsIn) > 65536) theEnd(1);
    return;
  }
  char *head = strndup((char *)d, (size_t)(end - d) + 4);
  wsIn.start += (size_t)(end - d) + 4;
  char key[128];
  if (headerValue(head, "Sec-WebSocket-Key", key, sizeof key) == 0) {
    const char *no = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    buf_put(&wsOut, no, strlen(no));
    buf_flush(&wsOut, ws);
    free(head);
    theEnd(1);
  }
  free(head);
  char joined[256];
  snprintf(joined, sizeof joined, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
  uint8_t digest[20];
  sha1((const uint8_t *)joined, strlen(joined), digest);
  char accept[32];
  base64(digest, 20, accept);
  char answer[256];
  int n = snprintf(answer, sizeof answer, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", accept);
  buf_put(&wsOut, answer, n);
  wsUpgraded = 1;
  /* the server's one connection: nothing else in the container can reach the proxy from now on */
  close(wsListen);
  wsListen = -1;
  /* the answer leaves before the program is forked: the server's begin is on the path to the id, the program is not */
  buf_flush(&wsOut, ws);
  startProgram();
}

static void wsFrames(void) {
  for (;;) {
    uint8_t *d = wsIn.data + wsIn.start;
    size_t len = buf_len(&wsIn);
    if (len < 2) return;
    int fin = d[0] & 0x80, opcode = d[0] & 0x0F, masked = d[1] & 0x80;
    if (d[0] & 0x70) return closeServer(1002, "a reserved bit");
    uint64_t n = d[1] & 0x7F;
    size_t h = 2;
    if (n == 126) {
      if (len < 4) return;
      n = (uint64_t)d[2] << 8 | d[3];
      h = 4;
    } else if (n == 127) {
      if (len < 10) return;
      n = 0;
      for (int i = 0; i < 8; i++) n = n << 8 | d[2 + i];
      h = 10;
    }
    if (n > MAX_MESSAGE) return closeServer(1009, "a message past 256 MiB");
    uint8_t maskKey[4] = {0, 0, 0, 0};
    if (masked) {
      if (len < h + 4) return;
      memcpy(maskKey, d + h, 4);
      h += 4;
    }
    if (len < h + n) {
      buf_reserve(&wsIn, h + n - len);
      return;
    }
    uint8_t *p = wsIn.data + wsIn.start + h;
    if (maskKey[0] | maskKey[1] | maskKey[2] | maskKey[3])
      for (uint64_t i = 0; i < n; i++) p[i] ^= maskKey[i & 3];
    wsIn.start += h + n;
    if (opcode >= 8) {
      if (!fin || n > 125) return closeServer(1002, "a control frame fragmented or too long");
      if (opcode == 8) {
        uint16_t code = n >= 2 ? (uint16_t)(p[0] << 8 | p[1]) : 0;
        if (n >= 2) wsSend(8, p, 2, NULL, 0);
        else wsSend(8, NULL, 0, NULL, 0);
        (void)code;
        fcntl(ws, F_SETFL, fcntl(ws, F_GETFL) & ~O_NONBLOCK);
        buf_flush(&wsOut, ws);
        theEnd(0);
      }
      if (opcode == 9) wsSend(10, p, n, NULL, 0);
      if (opcode != 9 && opcode != 10) return closeServer(1002, "a reserved opcode");
      continue;
    }
    if (opcode == 0) {
      if (!fragmented) return closeServer(1002, "a continuation with no message");
      if (buf_len(&fragments) + n > MAX_MESSAGE) return closeServer(1009, "a message past 256 MiB");
      buf_put(&fragments, p, n);
      if (fin) {
        fragmented = 0;
        onFrame(fragments.data + fragments.start, buf_len(&fragments));
        buf_free(&fragments);
      }
      continue;
    }
    if (fragmented) return closeServer(1002, "a new message inside a fragmented one");
    if (opcode == 1) return closeServer(1003, "frames are binary messages");
    if (opcode != 2) return closeServer(1002, "a reserved opcode");
    if (!fin) {
      fragmented = 1;
      buf_put(&fragments, p, n);
      continue;
    }
    onFrame(p, n);
  }
}

static void wsRead(void) {
  for (;;) {
    buf_reserve(&wsIn, 65536);
    ssize_t n = read(ws, wsIn.data + wsIn.end, wsIn.cap - wsIn.end);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) theEnd(0);
    wsIn.end += (size_t)n;
    if ((size_t)n < 65536) break;
  }
  if (!wsUpgraded) wsHandshake();
  if (wsUpgraded) wsFrames();
}

/* ---------- the loop ---------- */

static int listenOn(const char *address, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, address, &a.sin_addr);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0) {
    say("cannot listen on %s:%d: %s", address, port, strerror(errno));
    exit(1);
  }
  return fd;
}

static int childPipe[2];
static void onChild(int s) {
  (void)s;
  int saved = errno;
  ssize_t ignored = write(childPipe[1], "c", 1);
  (void)ignored;
  errno = saved;
}

static void reap(void) {
  char drain[64];
  while (read(childPipe[0], drain, sizeof drain) > 0) {}
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    if (pid == program) programExited(status);
    else if (pid == fusePid) fusePid = 0;
  }
}

int main(int argc, char **argv) {
  fuseCommand = argc > 1 ? argv + 1 : NULL;
  signal(SIGPIPE, SIG_IGN);
  buf_put(&rotating, "{}", 2);
  readLaunch();
  if (pipe2(childPipe, O_CLOEXEC | O_NONBLOCK) < 0) return 1;
  struct sigaction sa = {.sa_handler = onChild, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
  sigaction(SIGCHLD, &sa, NULL);
  for (int i = 0; i < MAX_HTTP; i++) https[i].fd = -1;
  apiListen = listenOn("127.0.0.1", PROGRAM_PORT);
  wsListen = listenOn("0.0.0.0", PROXY_PORT);
  say("listening on ws://127.0.0.1:%d", PROXY_PORT);
  static struct pollfd fds[MAX_HTTP + 8];
  static struct http *of[MAX_HTTP + 8];
  for (;;) {
    int n = 0;
    fds[n] = (struct pollfd){.fd = childPipe[0], .events = POLLIN};
    of[n++] = NULL;
    int wsAt = -1, wsListenAt = -1, apiAt = -1, fuseAt = -1, startAt = -1;
    if (wsListen >= 0) fds[wsListenAt = n++] = (struct pollfd){.fd = wsListen, .events = POLLIN};
    if (ws >= 0) fds[wsAt = n++] = (struct pollfd){.fd = ws, .events = POLLIN | (buf_len(&wsOut) > 0 ? POLLOUT : 0)};
    fds[apiAt = n++] = (struct pollfd){.fd = apiListen, .events = POLLIN};
    if (fuseSide >= 0) fds[fuseAt = n++] = (struct pollfd){.fd = fuseSide, .events = POLLIN | (buf_len(&fuseOut) > 0 ? POLLOUT : 0)};
    if (startErrorPipe >= 0) fds[startAt = n++] = (struct pollfd){.fd = startErrorPipe, .events = POLLIN};
    int first = n;
    for (int i = 0; i < MAX_HTTP; i++) {
      struct http *h = &https[i];
      if (h->fd < 0) continue;
      of[n] = h;
      fds[n++] = (struct pollfd){.fd = h->fd, .events = (h->parsed ? 0 : POLLIN) | (buf_len(&h->out) > 0 ? POLLOUT : 0)};
    }
    for (int i = 0; i < n; i++) fds[i].revents = 0;
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      say("poll: %s", strerror(errno));
      return 1;
    }
    if (fds[0].revents) reap();
    if (startAt >= 0 && fds[startAt].revents) readStartError();
    if (wsListenAt >= 0 && (fds[wsListenAt].revents & POLLIN) && ws < 0) {
      ws = accept4(wsListen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (ws >= 0) {
        int one = 1;
        setsockopt(ws, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      }
    }
    if (apiAt >= 0 && (fds[apiAt].revents & POLLIN)) {
      int fd = accept4(apiListen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        int slot = -1;
        for (int i = 0; i < MAX_HTTP && slot < 0; i++) if (https[i].fd < 0) slot = i;
        if (slot < 0) close(fd);
        else https[slot].fd = fd;
      }
    }
    if (wsAt >= 0 && (fds[wsAt].revents & (POLLIN | POLLHUP | POLLERR))) wsRead();
    if (fuseAt >= 0 && fuseSide >= 0 && (fds[fuseAt].revents & (POLLIN | POLLHUP | POLLERR))) fuseSideRead();
    for (int i = first; i < n; i++) {
      struct http *h = of[i];
      if (h->fd != fds[i].fd) continue;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (!h->parsed) httpRead(h);
        else if (fds[i].revents & (POLLHUP | POLLERR)) httpClose(h);
      }
    }
    /* what waits to be written: tried now (most writes complete at once), the rest when poll says */
    for (int i = 0; i < MAX_HTTP; i++) {
      struct http *h = &https[i];
      if (h->fd < 0) continue;
      if (buf_flush(&h->out, h->fd) < 0) httpClose(h);
      else if (h->closing && buf_len(&h->out) == 0 && h->channel == 0) httpClose(h);
    }
    if (fuseSide >= 0 && buf_flush(&fuseOut, fuseSide) < 0) fuseSideGone();
    if (ws >= 0 && buf_flush(&wsOut, ws) < 0) theEnd(0);
  }
}
