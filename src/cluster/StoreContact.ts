/**
 * What this node has heard from the store: whether its last call got through, and the highest
 * log version any answer named (appends, read barriers, watch deliveries). The follower compares
 * that head with what it has applied to notice a silent watch; the metrics show both.
 */
export class StoreContact {
  reachable = false;
  /** The highest log version the store has told us of. */
  knownHead = 0;
  /** Answers that named the log's head so far: the follower asks for the head itself when none has for a while. */
  headReports = 0;

  /** Notes what a store call said of the store's reachability and of the log's head. */
  heard(ok: boolean, headVersion = 0): void {
    this.reachable = ok;
    if (headVersion > 0) this.headReports++;
    if (headVersion > this.knownHead) this.knownHead = headVersion;
  }
}
