// uPlot charts (canvas, ~50 kB, fast with many points) and SVG sparklines for table rows.
import { h } from 'preact';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { useEffect, useRef } from 'preact/hooks';

const AXIS: uPlot.Axis = { stroke: '#5b6672', grid: { stroke: '#e6e9ed', width: 1 }, ticks: { stroke: '#d0d5db', width: 1 } };

export interface ChartSeries {
  label: string;
  color: string;
  fill?: string;
}

/** A time chart: `data` is [xs (s), ...series]; `series` their labels and colours. */
const pad = (n: number) => String(n).padStart(2, '0');
/** The legend's time, local, to the second (a plain function: uPlot's template formatter cost a few ms a tick on the 5,000-variable page). */
function legendTime(_u: uPlot, v: number | null): string {
  if (v === null || !Number.isFinite(v)) return '--';
  const d = new Date(v * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function Chart({ data, series, height = 220, testid, band }: { data: uPlot.AlignedData; series: ChartSeries[]; height?: number; testid: string; band?: boolean }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const el = box.current!;
    const width = el.clientWidth || 600;
    const opts: uPlot.Options = {
      width,
      height,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true } },
      axes: [AXIS, { ...AXIS, size: 60 }],
      // The legend names the point under the cursor to the second: a trend bucket is 10 s.
      series: [{ value: legendTime }, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 1.5, fill: s.fill, spanGaps: false, points: { show: false } }))],
      ...(band ? { bands: [{ series: [2, 1] as [number, number], fill: 'rgba(31,111,235,0.15)' }] } : {}),
    };
    plot.current = new uPlot(opts, data, el);
    const ro = new ResizeObserver(() => plot.current?.setSize({ width: el.clientWidth || width, height }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [series.length, height]);
  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);
  return <div class="chart" ref={box} data-testid={testid}></div>;
}

/** A 96×22 sparkline path of the values given (nulls are gaps). */
export function Spark({ values }: { values: Array<number | null> }) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values)
    if (v !== null) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  if (lo === Infinity) return <svg class="spark" viewBox="0 0 96 22"></svg>;
  const span = hi - lo || 1;
  const n = values.length;
  let d = '';
  let pen = false;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === null) {
      pen = false;
      continue;
    }
    const x = n === 1 ? 48 : (i / (n - 1)) * 94 + 1;
    const y = hi === lo ? 11 : 20 - ((v - lo) / span) * 18;
    d += `${pen ? 'L' : 'M'}${x.toFixed(1)} ${y.toFixed(1)}`;
    pen = true;
  }
  return (
    <svg class="spark" viewBox="0 0 96 22">
      <path d={d} />
    </svg>
  );
}
