import { z } from 'zod';

// Placeholder: operator annotations define their section here (annotations issue).
export const annotationsSectionSchema = z.strictObject({}).optional().meta({ description: 'Operator annotations (not yet available)' });
export type AnnotationsSection = z.output<typeof annotationsSectionSchema>;
