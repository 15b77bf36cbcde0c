// Human units for what the console shows: bytes, rates, durations,
// counts and times. Every function takes a number (or null for "none")
// and returns a string.

const DASH = '—';

// count formats an integer with thousands separators: 1234567 is
// "1,234,567".
export function count(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return DASH;
  return Math.round(n).toLocaleString('en-US');
}

// bytes formats a size in binary units: 1536 is "1.5 KiB".
export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return DASH;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = Math.abs(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  const sign = n < 0 ? '-' : '';
  return sign + (i === 0 ? String(Math.round(v)) : short(v)) + ' ' + units[i];
}

// rate formats a per-second rate with a unit: rate(1530, 'rec') is
// "1.53k rec/s".
export function rate(n, unit) {
  if (n === null || n === undefined || Number.isNaN(n)) return DASH;
  return metric(n) + ' ' + (unit ? unit + '/s' : '/s');
}

// metric formats a number with k, M, G suffixes: 1530 is "1.53k".
export function metric(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return DASH;
  const a = Math.abs(n);
  if (a >= 1e9) return short(n / 1e9) + 'G';
  if (a >= 1e6) return short(n / 1e6) + 'M';
  if (a >= 1e3) return short(n / 1e3) + 'k';
  return short(n);
}

// duration formats milliseconds: 0.42 is "420 µs", 1500 is "1.5 s",
// 200000 is "3 min 20 s".
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return DASH;
  const a = Math.abs(ms);
  if (a < 1) return short(ms * 1000) + ' µs';
  if (a < 1000) return short(ms) + ' ms';
  if (a < 60e3) return short(ms / 1000) + ' s';
  const s = Math.round(a / 1000);
  if (s < 3600) return Math.floor(s / 60) + ' min' + (s % 60 ? ' ' + (s % 60) + ' s' : '');
  const h = Math.floor(s / 3600);
  if (h < 48) return h + ' h' + (Math.floor((s % 3600) / 60) ? ' ' + Math.floor((s % 3600) / 60) + ' min' : '');
  return Math.floor(h / 24) + ' d';
}

// time formats Unix milliseconds as local date and time,
// "2026-05-01 12:00:03".
export function time(ms) {
  if (!ms) return DASH;
  const d = new Date(ms);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// clock formats Unix milliseconds as the time of day, "12:00:03".
export function clock(ms) {
  if (!ms) return DASH;
  return time(ms).slice(11);
}

// ago says how long before now a time was: "12 s ago".
export function ago(ms, now = Date.now()) {
  if (!ms) return DASH;
  const d = now - ms;
  if (d < 1000) return 'just now';
  return duration(d) + ' ago';
}

// percent formats a ratio 0..1: 0.153 is "15.3 %".
export function percent(r) {
  if (r === null || r === undefined || Number.isNaN(r)) return DASH;
  return short(r * 100) + ' %';
}

// short rounds to three significant digits without trailing zeros.
function short(v) {
  const a = Math.abs(v);
  if (a === 0) return '0';
  const digits = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  return String(Number(v.toFixed(digits)));
}
