/** The job queue of schedule runs: one job per run (a due tick, or a run now). */
export const RUN_QUEUE = 'schedule-runs';
/** The job queue of schedule deliveries: one job per delivery of a run, retried with backoff. */
export const SCHEDULE_DELIVERY_QUEUE = 'schedule-deliveries';

export interface RunJobData {
  runId: string;
}

export interface ScheduleDeliveryJobData {
  deliveryId: string;
}
