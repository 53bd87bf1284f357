// `ocx2 containers ...` is a client of the tool-container server (docs/containers.md), not a tool
// of the repository: bin/ocx2.ts hands its arguments to src/containers/ContainersCli.ts, whose
// options repeat (--volume, --fuse-file, --fuse-directory) as no tool's do. It is in the registry
// so that `ocx2 --help`, `ocx2 list` and `ocx2 help containers` show it with the others; this
// definition says what it takes, and its handler is reached only when ocx2's own options come
// before its name, which it does not take.

import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { defineTool } from "./Tool.js"

const text = (description: string) => Schema.optionalWith(Schema.String.annotations({ description }), { exact: true })

export const ContainersInput = Schema.Struct({
  command: Schema.Literal("run", "volumes", "volume-create", "version", "output").annotations({
    description:
      "run: run a tool container; volumes: list your volumes; volume-create: create one; version: the server's version and capabilities; " +
      "output: what the program of a container you ran wrote, as the server kept it"
  }),
  subject: text("run: the image, REPOSITORY@sha256:DIGEST (the manifest's digest); volume-create: the new volume's name; output: the container's id, as run printed it"),
  mode: text("volume-create: the volume's mode, ephemeral, read_only or persistent"),
  server: text("the server, ws://HOST:PORT (by default $OCX2_CONTAINERS_URL)"),
  token_file: text("the file holding your token, which `ocx2-containers token` minted (by default the token is $OCX2_CONTAINERS_TOKEN)"),
  layout: text("run: an OCI image layout directory holding the image; the server fetches what it lacks from it, checked by digest"),
  template: text("run: the template id handed to the container's proxy as it is (default: default)"),
  memory: text("run: the container's memory, in bytes or with K, M, G (default 256M)"),
  disk: text("run: the container's disk, in bytes or with K, M, G (default 1G)"),
  arguments: text("run: the arguments, any JSON, handed to the container's program byte for byte"),
  secrets: text("run: a JSON object of the secrets' first values, fed to the container when it registers; never in the request"),
  volume: text("run: a volume mount NAME:CONTAINER-PATH:MODE[:RELATIVE-PATH]; give it once for each mount"),
  fuse_file: text("run: a FUSE file mount ID:CONTAINER-PATH:HOST-FILE, whose every read and write this client answers from HOST-FILE; once for each"),
  stream: text("output: stdout or stderr, the stream to print (default stdout)"),
  fuse_directory: text("run: a FUSE directory mount ID:CONTAINER-PATH:HOST-DIRECTORY, whose every read and write this client answers from HOST-DIRECTORY; once for each")
})

export const containers = defineTool({
  name: "containers",
  summary: "Run a tool container on a tool-container server, and manage your volumes there",
  description:
    "ocx2 containers COMMAND [OPTIONS] is a client of a tool-container server (ocx2-containers serve): run runs a " +
    "tool container from an image you name by its manifest's digest, prints its id, `active` and `inactive` as the " +
    "container reports them, and `ended` when it ends (Ctrl-C stops it); volumes lists the volumes of the identity " +
    "your token names, volume-create creates one, version asks the server's version and capabilities, output ID prints " +
    "what the program of the container ID (one you ran) wrote on its stdout, or with --stream stderr its stderr: the last " +
    "256 KiB at most, as the server keeps it, during the run and after it. The server " +
    "is --server or $OCX2_CONTAINERS_URL, the token --token-file or $OCX2_CONTAINERS_TOKEN. --dry-run says what it " +
    "would send, and connects to nothing. It takes none of ocx2's own options (--json, --repository, --user) and " +
    "writes nothing in Fossil. Exit status: 0 done, 1 the run's error or a failure, 2 refused or bad usage.",
  input: ContainersInput,
  positional: ["command", "subject", "mode"],
  output: Schema.Struct({}),
  allow: () => undefined,
  offeredBy: ["cli"],
  notOfferedBecause: "it is a client of a tool-container server, which a person or a program runs at a command line",
  handle: () =>
    Effect.succeed({
      operations: [],
      stopped: {
        reason: "refused" as const,
        message: "ocx2 containers takes none of ocx2's own options: run it as `ocx2 containers COMMAND [OPTIONS]` (ocx2 help containers)"
      }
    })
})
