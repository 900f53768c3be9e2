/**
 * The narrow interface between a source that reports machine conditions (OPC UA Alarms &
 * Conditions, Part 9) and whoever turns them into records (the annotations component). Sources
 * must not import annotations, so both sides meet here, the way samples meet at `SampleSink`.
 *
 * A source decodes each event notification into a typed `ConditionEvent` (or refuses it with a
 * reason, counted on its side) and hands them over in order, bracketed by the ConditionRefresh
 * markers (Part 9 §5.5.7: RefreshStartEvent, the retained conditions, RefreshEndEvent). Everything
 * is plain data: node ids as text, times as epoch ms.
 */

/**
 * Where an event's `time` came from. `Time` is the event's own (Part 5 §6.4.2). A server that
 * sends OPC UA's null DateTime (1601-01-01) or no Time at all gets, in this order, the condition's
 * ActiveState/TransitionTime, the event's ReceiveTime (when the server received it from the
 * device), and last the time the gateway received the notification.
 */
export type EventTimeSource = 'Time' | 'ActiveState.TransitionTime' | 'ReceiveTime' | 'gateway';

/** One decoded event of a condition (or of a plain event type, then the condition fields are null). */
export interface ConditionEvent {
  /** EventId (ByteString) as hex: unique per state change of a condition (Part 5 §6.4.2). */
  eventId: string;
  /** EventType node id text (`ns=0;i=10637`) and its standard name when it has one (`OffNormalAlarmType`). */
  eventType: string;
  eventTypeName: string | null;
  /** SourceNode node id text and SourceName (the object the event is about, e.g. `Press1`). */
  sourceNode: string | null;
  sourceName: string;
  /** Time of the event at the source (epoch ms; Part 5 §6.4.2 Time), or its stand-in: see timeSource. */
  time: number;
  /** What `time` is: the event's Time, or the first of the stand-ins the server did send. */
  timeSource: EventTimeSource;
  /** Message text (LocalizedText.text), '' when the server sent none. */
  message: string;
  /** 1 (lowest) .. 1000 (highest), Part 5 §6.4.2. */
  severity: number;
  /** ConditionId: the node id of the condition instance (Part 9 §5.5.2); null for plain events. */
  conditionId: string | null;
  conditionName: string | null;
  /** True when the event reports a previous state of the condition (Part 9 §5.5.2 BranchId not null). */
  branch: boolean;
  /** Retain (Part 9 §5.5.2): the condition is of interest (active, or waiting for acknowledgement). */
  retain: boolean | null;
  /** ActiveState/Id (AlarmConditionType, Part 9 §5.8.2); null when the type has none. */
  active: boolean | null;
  /** ActiveState/TransitionTime: when the condition became active or inactive (epoch ms), if the server says. */
  activeTransitionTime: number | null;
  acked: boolean | null;
  confirmed: boolean | null;
}

export type ConditionNotice =
  | { kind: 'event'; event: ConditionEvent }
  /** RefreshStartEvent: the retained conditions follow (Part 9 §5.5.7). */
  | { kind: 'refresh_start'; at: number }
  /** RefreshEndEvent: every retained condition was sent; what was not sent is no longer retained. */
  | { kind: 'refresh_end'; at: number }
  /** The source lost sight of the server: a refresh in progress is void. */
  | { kind: 'link_lost'; at: number }
  /**
   * An event of this condition was refused (malformed, counted by the source): the server still
   * sent it, so a refresh in progress has mentioned the condition (it is retained).
   */
  | { kind: 'refused'; conditionId: string; at: number }
  /**
   * The server discarded events of the subscription (EventQueueOverflowEvent, Part 4 §5.12.1.5):
   * a refresh in progress may have lost some of its conditions, so it is void; the source asks for
   * another one.
   */
  | { kind: 'overflow'; at: number };

/** What consumes condition notices (the annotations component's alarm annotator). */
export interface ConditionEventTarget {
  /**
   * Handles the notices of one source, in order. Synchronous: returns after they are durably
   * stored (or refused for a reason the target counts itself). Throws when they could not be
   * stored (the disk refused): the source then asks the server for a ConditionRefresh again.
   */
  conditionNotices(source: string, notices: readonly ConditionNotice[]): void;
}

/** What a source is given (SourceContext.conditions). */
export interface ConditionEventSink extends ConditionEventTarget {
  /** Called when a consumer (re)attaches: the source should refresh, as events may have gone nowhere meanwhile. */
  onRefreshWanted(listener: () => void): () => void;
}

/** Thrown by the router when no consumer is attached (annotations off, or being reloaded). */
export class NoConditionConsumerError extends Error {
  constructor() {
    super('no consumer for condition events is attached (annotations.alarms is not configured or is being reloaded)');
    this.name = 'NoConditionConsumerError';
  }
}

/**
 * Routes condition notices from sources to the consumer attached now. Sources are built before
 * the annotations component and outlive its reloads, so the consumer is attached and detached
 * here; each attach asks the sources to ConditionRefresh, which restores whatever they could not
 * deliver in between.
 */
export class ConditionRouter implements ConditionEventSink {
  private target: ConditionEventTarget | null = null;
  private readonly listeners = new Set<() => void>();

  attach(target: ConditionEventTarget): () => void {
    this.target = target;
    for (const l of this.listeners) {
      try {
        l();
      } catch {
        // a source's listener must never break the attach
      }
    }
    return () => {
      if (this.target === target) this.target = null;
    };
  }

  get attached(): boolean {
    return this.target !== null;
  }

  conditionNotices(source: string, notices: readonly ConditionNotice[]): void {
    if (!this.target) throw new NoConditionConsumerError();
    this.target.conditionNotices(source, notices);
  }

  onRefreshWanted(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
