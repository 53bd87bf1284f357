import * as Effect from "effect/Effect"
import * as FossilRepository from "../../layers/FossilRepository.js"

// Loaded only when --repository is given: opening a repository costs the native SQLite addon.

/** The user's effective capabilities (fullcap) in the repository, "" when it cannot be read. */
export const capabilitiesOf = (repository: string, user: string): Effect.Effect<string> =>
  Effect.scoped(
    Effect.flatMap(FossilRepository.make({ path: repository }), (service) => service.user(user))
  ).pipe(
    Effect.map((found) => found?.fullcap ?? ""),
    Effect.catchAll(() => Effect.succeed(""))
  )
