/**
 * vitest's global setup: the environment the workers, and every program a test starts from them,
 * inherit. NODE_EXTRA_CA_CERTS, where the machine sets it, makes every Node program read and parse
 * the whole CA bundle as it starts, about 0.06 s of CPU each: a third of what a CLI call of ours
 * costs, over a thousand program starts a run. The tests reach nothing over TLS (their servers are
 * on 127.0.0.1, over HTTP), so their programs go without it.
 */
export default function setup(): void {
  delete process.env.NODE_EXTRA_CA_CERTS
}
