import { z } from 'zod';

/** A machine variable id (interface §2.1: TypeID with the `mvr_` prefix). */
export const machineVariableId = z
  .string()
  .regex(/^mvr_[A-Za-z0-9_]+$/, { error: 'is not a machine variable id (mvr_...)' })
  .meta({ description: 'Machine variable id (mvr_...) the value is stored under', examples: ['mvr_01hpressure'] });

/** Name of a source or device: appears in logs, metrics labels and status. */
export const sourceName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, { error: 'must be 1-64 letters, digits, "_", "." or "-"' })
  .meta({ description: 'Name shown in status, logs and metric labels', examples: ['press-line-1'] });

/** Linear scaling applied to a device value: engineering = raw * scale + offset. */
export const scaleOffset = {
  scale: z.number().refine(Number.isFinite, { error: 'must be a finite number' }).default(1).meta({ description: 'Multiplier applied to the raw value' }),
  offset: z.number().refine(Number.isFinite, { error: 'must be a finite number' }).default(0).meta({ description: 'Added after scaling' }),
};

/**
 * The unit of a mapped value as it is stored (after scale and offset). Optional; when given it is
 * compared with the unit the organisation's catalog gives the machine variable (`check --online`,
 * the console's Apply preview) and shown with the values in the console.
 */
export const unitSetting = z
  .string()
  .trim()
  .min(1, { error: 'is empty; leave unit out when the value has none' })
  .max(32, { error: 'is longer than 32 characters' })
  .optional()
  .meta({ description: 'Unit of the stored value (after scale and offset), as the organisation\'s catalog writes it: checked against the catalog\'s unit of the machine variable (check --online, the console\'s Apply preview) and shown with the values in the console', examples: ['°C', 'bar', 'rpm'] });
