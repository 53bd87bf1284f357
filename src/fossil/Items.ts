// What reading a repository gives (its items, each in server order, and the cursor) is the
// Repository service's contract, defined in services/Repository.ts; src/fossil's readers name
// it here.
export type {
  Checkin, CheckinTags, Codes, Cursor, Item, Post, ReadBatch, Receipt, TagArtifact, TagSet, TicketChange,
  UnversionedFile, User
} from "../../services/Repository.js"
export { isAfter, serverOrder, startCursor } from "../../services/Repository.js"
