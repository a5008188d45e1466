// The circuit explorer's script (no dependencies), copied next to its pages by reports/explorer.build_explorer:
// the component grids drawn from each page's JSON block, the K selector, the switch to the known circuit alone
// (testbed models), and the scorer or method switch.
(function () {
  var errors = document.getElementById('errors');
  window.addEventListener('error', function (e) {
    if (errors) { errors.hidden = false; errors.textContent += 'JavaScript error: ' + e.message + '\n'; }
  });
  window.addEventListener('load', function () {
    Array.prototype.forEach.call(document.images, function (img) {
      if (!img.complete || img.naturalWidth === 0) {
        errors.hidden = false;
        errors.textContent += 'Missing image: ' + img.getAttribute('src') + '\n';
      }
    });
  });
  var labels = {I: ['in', 'certified in'], A: ['abs', 'abstained (in the baseline only)'],
                X: ['oth', 'abstained (outside the baseline)'], O: ['out', 'certified out']};
  function each(list, f) { Array.prototype.forEach.call(list, f); }
  function votes(b64) {
    var raw = atob(b64), out = new Uint16Array(raw.length / 2);
    for (var i = 0; i < out.length; i++) out[i] = raw.charCodeAt(2 * i) | (raw.charCodeAt(2 * i + 1) << 8);
    return out;
  }
  function render(data, box, index) {
    var k = data.k[index], v = votes(k.votes);
    box.textContent = '';
    data.layers.forEach(function (layer) {
      var row = document.createElement('div'), counts = {I: 0, A: 0, X: 0, O: 0}, nTrue = 0;
      row.className = 'layer';
      var cells = document.createElement('div');
      cells.className = 'cells';
      for (var u = layer.start; u < layer.start + layer.size; u++) {
        var c = k.cat.charAt(u), cell = document.createElement('span');
        var isTrue = data.truth !== undefined && data.truth.charAt(u) === '1';
        counts[c] += 1;
        if (isTrue) nTrue += 1;
        cell.className = 'c ' + labels[c][0] + (isTrue ? ' t' : '');
        cell.title = layer.name + '.' + data.names[u] + ': ' + labels[c][1] + '; ' + v[u] + ' of ' + data.n +
          ' certification votes (' + Math.round(100 * v[u] / data.n) + '%); baseline: ' + (k.base.charAt(u) === '1' ? 'in' : 'out') +
          (data.truth === undefined ? '' : (isTrue ? '; true channel (ground truth)' : '; not in the true circuit'));
        cells.appendChild(cell);
      }
      var title = document.createElement('b');
      title.textContent = layer.name;
      row.appendChild(title);
      var text = ' ' + counts.I + ' in, ' + (counts.A + counts.X) + ' abstained, ' + counts.O + ' out of ' + layer.size +
        (data.truth === undefined ? '' : '; ' + nTrue + ' true');
      row.appendChild(document.createTextNode(text));
      row.appendChild(cells);
      box.appendChild(row);
    });
  }
  // a circuit view (its K selector, its box, its data) is drawn when it is first shown
  function visible(element) {
    for (; element; element = element.parentElement) if (element.hidden) return false;
    return true;
  }
  function draw() {
    each(document.querySelectorAll('.circuit-view'), function (view) {
      if (view.getAttribute('data-drawn') || !visible(view)) return;
      view.setAttribute('data-drawn', '1');
      var data = JSON.parse(view.querySelector('script[type="application/json"]').textContent);
      var select = view.querySelector('select'), box = view.querySelector('.circuit');
      select.addEventListener('change', function () {
        render(data, box, +select.value);
        // the precision and recall against the known circuit at the selected K (one table per K)
        each(view.querySelectorAll('.truth-k'), function (table) {
          table.hidden = table.getAttribute('data-k') !== select.value;
        });
      });
      render(data, box, +select.value);
    });
  }
  // the switch to the known circuit alone: the checkbox (hidden without this script) marks its view
  each(document.querySelectorAll('.truth-toggle'), function (label) {
    var box = label.querySelector('input'), view = label.closest('.circuit-view, .graph-view');
    label.hidden = false;
    box.addEventListener('change', function () { view.classList.toggle('truth-only', box.checked); });
  });
  // a switch between scorers (or methods): its buttons show one panel each; #scorer=NAME opens NAME's
  var wanted = null;
  try { wanted = decodeURIComponent(location.hash).replace(/^#scorer=/, ''); } catch (e) { wanted = null; }
  each(document.querySelectorAll('.switched'), function (switched) {
    var buttons = switched.querySelectorAll(':scope > .switch > button');
    var panels = switched.querySelectorAll(':scope > .panel');
    function show(index) {
      each(panels, function (panel) { panel.hidden = +panel.getAttribute('data-panel') !== index; });
      each(buttons, function (button) {
        button.setAttribute('aria-pressed', String(+button.getAttribute('data-panel') === index));
      });
      draw();
    }
    each(buttons, function (button) {
      button.addEventListener('click', function () { show(+button.getAttribute('data-panel')); });
    });
    each(buttons, function (button) { if (button.getAttribute('data-name') === wanted) button.click(); });
  });
  draw();
})();
