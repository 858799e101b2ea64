// Python's strftime for the directives chat templates use (C locale), for strftime_now and harmony's date.
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];
const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

/**
 * Python `datetime.now().strftime(fmt)` for the directives chat templates use (local time, C locale), as
 * HF's `strftime_now` and vLLM's harmony start date compute it. Unknown directives are kept verbatim.
 */
export function strftime(fmt: string, d: Date): string {
  return fmt.replace(/%([-]?)([a-zA-Z%])/g, (whole, dash: string, c: string) => {
    const h12 = d.getHours() % 12 === 0 ? 12 : d.getHours() % 12;
    const start = new Date(d.getFullYear(), 0, 1);
    const yday = Math.floor((d.getTime() - start.getTime()) / 86_400_000) + 1;
    const num = (n: number, w = 2): string => (dash ? String(n) : pad(n, w));
    switch (c) {
      case 'Y':
        return String(d.getFullYear());
      case 'y':
        return pad(d.getFullYear() % 100);
      case 'm':
        return num(d.getMonth() + 1);
      case 'd':
        return num(d.getDate());
      case 'e':
        return String(d.getDate()).padStart(2, ' ');
      case 'H':
        return num(d.getHours());
      case 'I':
        return num(h12);
      case 'M':
        return num(d.getMinutes());
      case 'S':
        return num(d.getSeconds());
      case 'p':
        return d.getHours() < 12 ? 'AM' : 'PM';
      case 'j':
        return num(yday, 3);
      case 'a':
        return (DAYS[d.getDay()] ?? '').slice(0, 3);
      case 'A':
        return DAYS[d.getDay()] ?? '';
      case 'b':
      case 'h':
        return (MONTHS[d.getMonth()] ?? '').slice(0, 3);
      case 'B':
        return MONTHS[d.getMonth()] ?? '';
      case 'F':
        return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
      case '%':
        return '%';
      default:
        return whole;
    }
  });
}
