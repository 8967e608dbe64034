// The label check's suspects, fixed with the keyboard: j / k (or the arrows) move between the
// images, a takes the suggestion, s keeps the label, d drops the image, a digit gives it that
// class. Each key sets the image's own radio buttons (the form posts them), then moves on.
const cards = [...document.querySelectorAll("#suspects .suspect")];
const count = document.getElementById("suspects-count");
const CHOICES = { a: "accept", s: "keep", d: "drop" };

function typing(target) {
  return target instanceof HTMLElement && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName) && target.type !== "radio";
}

function choose(card, action) {
  const radio = card.querySelector(`input[type=radio][value="${action}"]`);
  if (radio) radio.checked = true;
  summarise();
}

function summarise() {
  const chosen = cards.map((card) => card.querySelector("input[type=radio]:checked")?.value || "keep");
  const relabelled = chosen.filter((value) => value === "accept" || value === "relabel").length;
  const dropped = chosen.filter((value) => value === "drop").length;
  count.textContent = relabelled || dropped
    ? `${relabelled} to relabel, ${dropped} to drop, ${chosen.length - relabelled - dropped} kept.`
    : "No change chosen yet.";
}

function move(from, step) {
  const next = cards[Math.min(cards.length - 1, Math.max(0, cards.indexOf(from) + step))];
  if (next) {
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  }
}

function onKey(event) {
  if (event.ctrlKey || event.altKey || event.metaKey || typing(event.target)) return;
  const card = event.target instanceof HTMLElement ? event.target.closest(".suspect") : null;
  if (!card) {
    if (["j", "ArrowDown"].includes(event.key) && cards.length) {
      event.preventDefault();
      cards[0].focus();
    }
    return;
  }
  if (event.key === "j" || event.key === "ArrowDown") {
    event.preventDefault();
    move(card, 1);
  } else if (event.key === "k" || event.key === "ArrowUp") {
    event.preventDefault();
    move(card, -1);
  } else if (CHOICES[event.key]) {
    choose(card, CHOICES[event.key]);
    move(card, 1);
  } else if (/^[0-9]$/.test(event.key)) {
    const select = card.querySelector("select");
    const option = select && [...select.options].find((item) => item.value === event.key);
    if (option) {
      select.value = option.value;
      choose(card, "relabel");
      move(card, 1);
    }
  }
}

document.addEventListener("keydown", onKey);
document.getElementById("suspects").addEventListener("change", summarise);
summarise();
