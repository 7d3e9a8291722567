/** What a benchmark section measures, shared by the sections and the report that renders them. */

export interface MemoryReading {
  label: string;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  /** Memory of C++ objects bound to JS objects (Buffers included). */
  external: number;
  /** Heap still used after a forced full garbage collection. */
  liveHeap: number;
  /** RSS right after that collection (V8 may have given some pages back by then). */
  rssAfterGc: number;
}

export interface Goal {
  name: string;
  target: string;
  measured: string;
  met: boolean;
}
