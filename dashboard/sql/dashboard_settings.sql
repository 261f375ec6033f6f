-- dashboard_settings: the thresholds the views judge against (the catalog's `settings` view), for the tiles and rules drawn on charts.
select * from settings;
