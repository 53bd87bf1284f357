// A clone's Repository for a node on a clone's host: a clone learns what the server holds only by
// pulling, so every read of a run's record pulls first (src/fossil/Pull.ts says why).
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { Repository, RepositoryUnavailable, type RepositoryService } from "../services/Repository.js"
import { pullClone } from "../src/fossil/Pull.js"
import * as FossilRepository from "./FossilRepository.js"

/** The clone's Repository (clone role: writes pushed as the node user), whose run records are read after a pull. */
export const make = (config: FossilRepository.FossilRepositoryConfig) =>
  Effect.gen(function*() {
    const inner = yield* FossilRepository.make(config)
    const pulled = pullClone(inner.path, config.holdFds !== undefined ? { holdFds: config.holdFds } : {}).pipe(
      Effect.mapError((e) => new RepositoryUnavailable({ path: inner.path, reason: e.message }))
    )
    const service: RepositoryService = {
      ...inner,
      thread: (post) => Effect.zipRight(pulled, inner.thread(post)),
      ticket: (id) => Effect.zipRight(pulled, inner.ticket(id))
    }
    return service
  })

export const layer = (config: FossilRepository.FossilRepositoryConfig) => Layer.scoped(Repository, make(config))
