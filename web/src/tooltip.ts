// One tooltip for the whole page: rows of label and exact value.

export type TooltipRows = [string, string][];

export class Tooltip {
  readonly el: HTMLDivElement;

  constructor(parent: HTMLElement) {
    this.el = document.createElement("div");
    this.el.className = "tooltip";
    this.el.dataset.testid = "tooltip";
    this.el.setAttribute("role", "tooltip");
    this.el.hidden = true;
    parent.appendChild(this.el);
  }

  show(clientX: number, clientY: number, title: string, rows: TooltipRows): void {
    this.el.replaceChildren();
    const h = document.createElement("div");
    h.className = "tooltip-title";
    h.textContent = title;
    this.el.appendChild(h);
    const table = document.createElement("table");
    for (const [k, v] of rows) {
      const tr = table.insertRow();
      const th = document.createElement("th");
      th.textContent = k;
      tr.appendChild(th);
      tr.insertCell().textContent = v;
    }
    this.el.appendChild(table);
    this.el.hidden = false;
    const pad = 12;
    const w = this.el.offsetWidth;
    const hgt = this.el.offsetHeight;
    let x = clientX + pad;
    let y = clientY + pad;
    if (x + w > window.innerWidth - 4) x = Math.max(4, clientX - pad - w);
    if (y + hgt > window.innerHeight - 4) y = Math.max(4, clientY - pad - hgt);
    this.el.style.left = `${x}px`;
    this.el.style.top = `${y}px`;
  }

  hide(): void {
    this.el.hidden = true;
  }
}
