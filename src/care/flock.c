// ocx2-flock.node: flock(2) for Node, which has none. An N-API addon written against the stable
// Node-API ABI with its few declarations here, so it builds with gcc alone (no node-gyp, no headers
// to download). One function: flock(fd, exclusive, wait) returns 0 when held, else the errno
// (EWOULDBLOCK when another holds it). Only a try (wait false) should run on the event loop.
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/file.h>

typedef struct napi_env__* napi_env;
typedef struct napi_value__* napi_value;
typedef struct napi_callback_info__* napi_callback_info;
typedef int napi_status;
typedef napi_value (*napi_callback)(napi_env, napi_callback_info);

extern napi_status napi_get_cb_info(napi_env, napi_callback_info, size_t*, napi_value*, napi_value*, void**);
extern napi_status napi_get_value_int32(napi_env, napi_value, int32_t*);
extern napi_status napi_get_value_bool(napi_env, napi_value, bool*);
extern napi_status napi_create_int32(napi_env, int32_t, napi_value*);
extern napi_status napi_create_function(napi_env, const char*, size_t, napi_callback, void*, napi_value*);
extern napi_status napi_set_named_property(napi_env, napi_value, const char*, napi_value);

static napi_value lock(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  int32_t fd = -1;
  bool exclusive = true, wait = false;
  int result = EINVAL;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == 0 && argc == 3 &&
      napi_get_value_int32(env, argv[0], &fd) == 0 && napi_get_value_bool(env, argv[1], &exclusive) == 0 &&
      napi_get_value_bool(env, argv[2], &wait) == 0) {
    int op = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);
    do result = flock(fd, op) == 0 ? 0 : errno; while (result == EINTR);
  }
  napi_value out;
  napi_create_int32(env, result, &out);
  return out;
}

napi_value napi_register_module_v1(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "flock", 5, lock, NULL, &fn) == 0) napi_set_named_property(env, exports, "flock", fn);
  return exports;
}

int32_t node_api_module_get_api_version_v1(void) { return 1; }
